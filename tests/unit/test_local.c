/* SPDX-License-Identifier: MIT */
/*
 * test_local.c - the local backend through the store seam: every op, version
 * guards, listing and name escaping, the xattr-less sidecar path, concurrent
 * ops on one object and on many, device-model timing, and the crash order of
 * pre_meta / data / meta.  Each test runs in a fresh mkdtemp dir under /tmp.
 */
#undef NDEBUG
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "tier/store.h"
#include "libtier/store/local.h"

struct env {
	char root[64];
	char pool[96];
	struct tier_cq *cq;
	struct tier_store *st;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int open_store(struct env *e, const struct tier_local_opts *extra)
{
	struct tier_local_opts o = { 0 };

	if (extra)
		o = *extra;
	o.dir = e->pool;
	return tier_store_local_create("testpool", &o, e->cq, &e->st);
}

static void close_store(struct env *e)
{
	assert_int_equal(tier_store_in_flight(e->st), 0);
	tier_store_destroy(e->st);
	e->st = NULL;
}

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	strcpy(e->root, "/tmp/tier-local-XXXXXX");
	assert_non_null(mkdtemp(e->root));
	snprintf(e->pool, sizeof(e->pool), "%s/pools/base", e->root);
	assert_int_equal(tier_cq_create(NULL, NULL, &e->cq), 0);
	assert_int_equal(open_store(e, NULL), 0);
	*state = e;
	return 0;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	return remove(path);
}

static int teardown(void **state)
{
	struct env *e = *state;

	if (e->st)
		close_store(e);
	tier_cq_destroy(e->cq);
	nftw(e->root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(e);
	return 0;
}

static void count_done(struct tier_store_op *op)
{
	(*(int *)op->priv)++;
}

/* Submit one op and drain until its callback ran; returns its result. */
static int run(struct env *e, struct tier_store_op *op)
{
	int done = 0;

	op->cb = count_done;
	op->priv = &done;
	assert_int_equal(tier_store_submit(e->st, op), 0);
	while (!done) {
		tier_cq_wait(e->cq, 1000);
		tier_cq_drain(e->cq);
	}
	return op->result;
}

static int put(struct env *e, const char *oid, uint64_t off, const void *buf, uint64_t len,
	       uint32_t flags, const char *meta, uint64_t version)
{
	struct tier_store_op op = { .opcode = TIER_STORE_WRITE, .flags = flags,
				    .off = off, .len = len, .buf = (void *)buf,
				    .version = version };

	snprintf(op.oid, sizeof(op.oid), "%s", oid);
	if (meta) {
		op.flags |= TIER_STORE_F_META;
		op.meta = meta;
		op.meta_len = (uint32_t)strlen(meta);
	}
	return run(e, &op);
}

static int get(struct env *e, const char *oid, uint64_t off, void *buf, uint64_t len)
{
	struct tier_store_op op = { .opcode = TIER_STORE_READ, .off = off, .len = len,
				    .buf = buf };

	snprintf(op.oid, sizeof(op.oid), "%s", oid);
	return run(e, &op);
}

/* STAT; meta (NUL-terminated) into meta[256] */
static int stat_obj(struct env *e, const char *oid, struct tier_store_op *op, char *meta)
{
	memset(op, 0, sizeof(*op));
	op->opcode = TIER_STORE_STAT;
	snprintf(op->oid, sizeof(op->oid), "%s", oid);
	op->meta_buf = meta;
	op->meta_cap = 255;
	if (meta)
		memset(meta, 0, 256);
	return run(e, op);
}

static int simple(struct env *e, enum tier_store_opcode opc, const char *oid, uint32_t flags)
{
	struct tier_store_op op = { .opcode = opc, .flags = flags };

	snprintf(op.oid, sizeof(op.oid), "%s", oid);
	return run(e, &op);
}

static void test_write_read_roundtrip_zero_fills_past_eof(void **state)
{
	struct env *e = *state;
	char buf[64];

	assert_int_equal(put(e, "obj", 10, "hello", 5, 0, NULL, 0), 5);
	memset(buf, 'x', sizeof(buf));
	assert_int_equal(get(e, "obj", 0, buf, sizeof(buf)), sizeof(buf));
	for (int i = 0; i < 64; i++)
		assert_int_equal(buf[i], (i >= 10 && i < 15) ? "hello"[i - 10] : 0);
	/* entirely past EOF: all zeros, still len */
	memset(buf, 'x', sizeof(buf));
	assert_int_equal(get(e, "obj", 1 << 20, buf, 16), 16);
	for (int i = 0; i < 16; i++)
		assert_int_equal(buf[i], 0);
}

static void test_absent_objects_are_enoent(void **state)
{
	struct env *e = *state;
	struct tier_store_op op;
	char buf[8];

	assert_int_equal(get(e, "nope", 0, buf, 8), -ENOENT);
	assert_int_equal(stat_obj(e, "nope", &op, NULL), -ENOENT);
	assert_int_equal(simple(e, TIER_STORE_REMOVE, "nope", 0), -ENOENT);
	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_SETMETA;
	op.flags = TIER_STORE_F_META;
	op.meta = "m";
	op.meta_len = 1;
	strcpy(op.oid, "nope");
	assert_int_equal(run(e, &op), -ENOENT);
	op.flags |= TIER_STORE_F_CREATE;
	op.version = 3;
	assert_int_equal(run(e, &op), 0);
	assert_int_equal(stat_obj(e, "nope", &op, NULL), 0);
	assert_int_equal(op.obj_size, 0);
	assert_int_equal(op.obj_version, 3);
}

static void test_stat_reports_size_version_mtime_meta(void **state)
{
	struct env *e = *state;
	struct tier_store_op op;
	char meta[256];
	uint64_t before = (uint64_t)time(NULL) * 1000000000ull;

	assert_int_equal(put(e, "obj", 100, "abcd", 4, 0, "clean-v7", 7), 4);
	assert_int_equal(stat_obj(e, "obj", &op, meta), 0);
	assert_int_equal(op.obj_size, 104);
	assert_int_equal(op.obj_version, 7);
	assert_int_equal(op.meta_len_out, 8);
	assert_string_equal(meta, "clean-v7");
	assert_true(op.obj_mtime_ns + 2000000000ull >= before);
	assert_true(op.obj_mtime_ns <= before + 10000000000ull);
	/* a plain write keeps meta and version */
	assert_int_equal(put(e, "obj", 0, "zz", 2, 0, NULL, 0), 2);
	assert_int_equal(stat_obj(e, "obj", &op, meta), 0);
	assert_int_equal(op.obj_version, 7);
	assert_string_equal(meta, "clean-v7");
	/* a too-small meta buffer is -ERANGE, with the needed length */
	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_STAT;
	strcpy(op.oid, "obj");
	op.meta_buf = meta;
	op.meta_cap = 3;
	assert_int_equal(run(e, &op), -ERANGE);
	assert_int_equal(op.meta_len_out, 8);
}

static void test_zero_punches_and_extends(void **state)
{
	struct env *e = *state;
	struct tier_store_op op;
	static uint8_t buf[16384];

	memset(buf, 0xAA, 8192);
	assert_int_equal(put(e, "z", 0, buf, 8192, 0, NULL, 0), 8192);
	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_ZERO;
	strcpy(op.oid, "z");
	op.off = 4096;
	op.len = 8192;
	op.flags = TIER_STORE_F_META;
	op.meta = "zeroed";
	op.meta_len = 6;
	op.version = 2;
	assert_int_equal(run(e, &op), 0);
	assert_int_equal(stat_obj(e, "z", &op, NULL), 0);
	assert_int_equal(op.obj_size, 12288);
	assert_int_equal(op.obj_version, 2);
	memset(buf, 0x55, sizeof(buf));
	assert_int_equal(get(e, "z", 0, buf, 12288), 12288);
	for (int i = 0; i < 12288; i++)
		assert_int_equal(buf[i], i < 4096 ? 0xAA : 0);
	/* ZERO creates an absent object, like WRITE */
	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_ZERO;
	strcpy(op.oid, "z2");
	op.off = 0;
	op.len = 5000;
	assert_int_equal(run(e, &op), 0);
	assert_int_equal(stat_obj(e, "z2", &op, NULL), 0);
	assert_int_equal(op.obj_size, 5000);
}

static void test_remove_deletes_data_and_meta(void **state)
{
	struct env *e = *state;
	struct tier_store_op op;
	char meta[256];

	assert_int_equal(put(e, "r", 0, "data", 4, 0, "m1", 1), 4);
	assert_int_equal(simple(e, TIER_STORE_REMOVE, "r", 0), 0);
	assert_int_equal(stat_obj(e, "r", &op, NULL), -ENOENT);
	/* a recreated object starts without the old meta */
	assert_int_equal(put(e, "r", 0, "new", 3, 0, NULL, 0), 3);
	assert_int_equal(stat_obj(e, "r", &op, meta), 0);
	assert_int_equal(op.obj_version, 0);
	assert_int_equal(op.meta_len_out, 0);
	assert_int_equal(op.obj_size, 3);
}

static void test_guards_fail_without_changing_anything(void **state)
{
	struct env *e = *state;
	struct tier_store_op op;
	char buf[4], meta[256];

	/* GUARD on an absent object */
	memset(&op, 0, sizeof(op));
	assert_int_equal(put(e, "g", 0, "AAAA", 4, TIER_STORE_F_GUARD, NULL, 0), -ECANCELED);
	assert_int_equal(stat_obj(e, "g", &op, NULL), -ENOENT);
	/* EXCL creates once */
	assert_int_equal(put(e, "g", 0, "AAAA", 4, TIER_STORE_F_EXCL, "v5", 5), 4);
	assert_int_equal(put(e, "g", 0, "BBBB", 4, TIER_STORE_F_EXCL, "v6", 6), -EEXIST);
	/* GUARD with the wrong version */
	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_WRITE;
	op.flags = TIER_STORE_F_GUARD | TIER_STORE_F_META;
	strcpy(op.oid, "g");
	op.buf = "CCCC";
	op.len = 4;
	op.meta = "v6";
	op.meta_len = 2;
	op.version = 6;
	op.expect_version = 4;
	assert_int_equal(run(e, &op), -ECANCELED);
	assert_int_equal(get(e, "g", 0, buf, 4), 4);
	assert_memory_equal(buf, "AAAA", 4);
	assert_int_equal(stat_obj(e, "g", &op, meta), 0);
	assert_int_equal(op.obj_version, 5);
	assert_string_equal(meta, "v5");
	/* GUARD with the right version */
	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_WRITE;
	op.flags = TIER_STORE_F_GUARD | TIER_STORE_F_META;
	strcpy(op.oid, "g");
	op.buf = "CCCC";
	op.len = 4;
	op.meta = "v6";
	op.meta_len = 2;
	op.version = 6;
	op.expect_version = 5;
	assert_int_equal(run(e, &op), 4);
	assert_int_equal(stat_obj(e, "g", &op, meta), 0);
	assert_int_equal(op.obj_version, 6);
	/* guarded REMOVE (evict) honours the version too */
	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_REMOVE;
	op.flags = TIER_STORE_F_GUARD;
	strcpy(op.oid, "g");
	op.expect_version = 5;
	assert_int_equal(run(e, &op), -ECANCELED);
	op.expect_version = 6;
	assert_int_equal(run(e, &op), 0);
	assert_int_equal(stat_obj(e, "g", &op, NULL), -ENOENT);
}

static int has_name(char **names, size_t n, const char *want)
{
	int hits = 0;

	for (size_t i = 0; i < n; i++)
		hits += strcmp(names[i], want) == 0;
	return hits;
}

static void test_list_prefix_escapes_and_skips_hidden(void **state)
{
	struct env *e = *state;
	static const char *const oids[] = {
		"rbd_data.1.0001", "rbd_data.1.0002", "rbd_data.2.0001",
		"a/b", ".hidden", "100%", "sp ace",
	};
	struct tier_store_op op;
	char path[256];
	int fd;

	for (size_t i = 0; i < 7; i++)
		assert_int_equal(put(e, oids[i], 0, "x", 1, 0, "m", 1), 1);
	/* foreign and hidden files in the pool dir are not objects */
	snprintf(path, sizeof(path), "%s/.junk.tmp", e->pool);
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/bad%%zz", e->pool);
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);
	/* '/' and a leading '.' never reach the file system raw */
	snprintf(path, sizeof(path), "%s/a%%2Fb", e->pool);
	assert_int_equal(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/%%2Ehidden", e->pool);
	assert_int_equal(access(path, F_OK), 0);

	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_LIST;
	op.prefix = "rbd_data.1.";
	assert_int_equal(run(e, &op), 2);
	assert_int_equal(op.n_names, 2);
	assert_int_equal(has_name(op.names, op.n_names, "rbd_data.1.0001"), 1);
	assert_int_equal(has_name(op.names, op.n_names, "rbd_data.1.0002"), 1);
	tier_store_list_free(op.names, op.n_names);

	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_LIST;
	op.prefix = "";
	assert_int_equal(run(e, &op), 7);
	for (size_t i = 0; i < 7; i++)
		assert_int_equal(has_name(op.names, op.n_names, oids[i]), 1);
	tier_store_list_free(op.names, op.n_names);
}

static void test_name_too_long_after_escaping(void **state)
{
	struct env *e = *state;
	char oid[TIER_OID_MAX];

	memset(oid, '/', sizeof(oid) - 1);
	oid[sizeof(oid) - 1] = '\0';
	assert_int_equal(put(e, oid, 0, "x", 1, 0, NULL, 0), -ENAMETOOLONG);
	memset(oid, 'a', sizeof(oid) - 1);
	assert_int_equal(put(e, oid, 0, "x", 1, 0, NULL, 0), 1);
}

static void reopen(struct env *e, const struct tier_local_opts *o)
{
	close_store(e);
	assert_int_equal(open_store(e, o), 0);
}

static void test_sidecar_fallback_when_xattrs_refused(void **state)
{
	struct env *e = *state;
	struct tier_store_op op;
	char meta[256], path[256];

	setenv("TIER_LOCAL_FORCE_SIDECAR", "1", 1);
	reopen(e, NULL);
	assert_int_equal(put(e, "a/b", 0, "data", 4, 0, "side-1", 1), 4);
	snprintf(path, sizeof(path), "%s/.a%%2Fb.meta", e->pool);
	assert_int_equal(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/a%%2Fb", e->pool);
	assert_true(getxattr(path, "user.tier.meta", meta, sizeof(meta)) < 0);
	assert_int_equal(stat_obj(e, "a/b", &op, meta), 0);
	assert_int_equal(op.obj_version, 1);
	assert_string_equal(meta, "side-1");
	/* the sidecar survives a restart and is not listed */
	reopen(e, NULL);
	unsetenv("TIER_LOCAL_FORCE_SIDECAR");
	assert_int_equal(stat_obj(e, "a/b", &op, meta), 0);
	assert_string_equal(meta, "side-1");
	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_LIST;
	op.prefix = "";
	assert_int_equal(run(e, &op), 1);
	assert_string_equal(op.names[0], "a/b");
	tier_store_list_free(op.names, op.n_names);
	/* back on xattrs: the new record wins over the stale sidecar */
	reopen(e, NULL);
	assert_int_equal(put(e, "a/b", 0, "DATA", 4, 0, "xattr-2", 2), 4);
	assert_int_equal(stat_obj(e, "a/b", &op, meta), 0);
	assert_int_equal(op.obj_version, 2);
	assert_string_equal(meta, "xattr-2");
	/* remove takes the sidecar with it */
	assert_int_equal(simple(e, TIER_STORE_REMOVE, "a/b", 0), 0);
	snprintf(path, sizeof(path), "%s/.a%%2Fb.meta", e->pool);
	assert_int_equal(access(path, F_OK), -1);
}

static void test_max_size_meta_roundtrips(void **state)
{
	struct env *e = *state;
	static uint8_t big[TIER_META_MAX], back[TIER_META_MAX];
	struct tier_store_op op = { .opcode = TIER_STORE_SETMETA,
				    .flags = TIER_STORE_F_META | TIER_STORE_F_CREATE };
	char meta[256];

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7 + 1);
	strcpy(op.oid, "big");
	op.meta = big;
	op.meta_len = sizeof(big);
	op.version = 9;
	/* too big for an ext4 xattr: goes to the sidecar, must still read back */
	assert_int_equal(run(e, &op), 0);
	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_STAT;
	strcpy(op.oid, "big");
	op.meta_buf = back;
	op.meta_cap = sizeof(back);
	assert_int_equal(run(e, &op), 0);
	assert_int_equal(op.obj_version, 9);
	assert_int_equal(op.meta_len_out, sizeof(big));
	assert_memory_equal(back, big, sizeof(big));
	/* then a small record replaces it */
	assert_int_equal(put(e, "big", 0, "x", 1, 0, "small", 10), 1);
	assert_int_equal(stat_obj(e, "big", &op, meta), 0);
	assert_int_equal(op.obj_version, 10);
	assert_string_equal(meta, "small");
	/* and a big one again */
	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_SETMETA;
	op.flags = TIER_STORE_F_META;
	strcpy(op.oid, "big");
	op.meta = big;
	op.meta_len = sizeof(big);
	op.version = 11;
	assert_int_equal(run(e, &op), 0);
	reopen(e, NULL);
	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_STAT;
	strcpy(op.oid, "big");
	op.meta_buf = back;
	op.meta_cap = sizeof(back);
	assert_int_equal(run(e, &op), 0);
	assert_int_equal(op.obj_version, 11);
	assert_memory_equal(back, big, sizeof(big));
}

#define N_OBJS 64

static void test_concurrent_ops_on_different_objects(void **state)
{
	struct env *e = *state;
	static struct tier_store_op ops[N_OBJS];
	static uint8_t bufs[N_OBJS][4096], back[4096];
	int done = 0;

	for (int i = 0; i < N_OBJS; i++) {
		memset(bufs[i], i + 1, sizeof(bufs[i]));
		memset(&ops[i], 0, sizeof(ops[i]));
		ops[i].opcode = TIER_STORE_WRITE;
		snprintf(ops[i].oid, sizeof(ops[i].oid), "obj.%d", i);
		ops[i].buf = bufs[i];
		ops[i].len = sizeof(bufs[i]);
		ops[i].cb = count_done;
		ops[i].priv = &done;
		assert_int_equal(tier_store_submit(e->st, &ops[i]), 0);
	}
	while (done < N_OBJS) {
		tier_cq_wait(e->cq, 1000);
		tier_cq_drain(e->cq);
	}
	for (int i = 0; i < N_OBJS; i++) {
		char oid[32];

		assert_int_equal(ops[i].result, 4096);
		snprintf(oid, sizeof(oid), "obj.%d", i);
		assert_int_equal(get(e, oid, 0, back, sizeof(back)), 4096);
		assert_memory_equal(back, bufs[i], sizeof(back));
	}
}

/* ---- racing guarded increments: every version is won exactly once ---- */

#define N_CLIENTS 8
#define PER_CLIENT 8

struct client {
	struct env *e;
	struct tier_store_op stat, write;
	uint64_t value;
	int wins, cancels;
	int *winners;        /* per version: how many increments claimed it */
	int *total;
};

static void client_stat_done(struct tier_store_op *op);

static void client_restat(struct client *c)
{
	memset(&c->stat, 0, sizeof(c->stat));
	c->stat.opcode = TIER_STORE_STAT;
	strcpy(c->stat.oid, "ctr");
	c->stat.cb = client_stat_done;
	c->stat.priv = c;
	assert_int_equal(tier_store_submit(c->e->st, &c->stat), 0);
}

static void client_write_done(struct tier_store_op *op)
{
	struct client *c = op->priv;

	if (op->result == -ECANCELED) {
		c->cancels++;
	} else {
		assert_int_equal(op->result, 8);
		c->winners[op->version]++;
		c->wins++;
		(*c->total)++;
	}
	if (c->wins < PER_CLIENT)
		client_restat(c);
}

static void client_stat_done(struct tier_store_op *op)
{
	struct client *c = op->priv;
	uint64_t v = op->obj_version;

	assert_int_equal(op->result, 0);
	memset(&c->write, 0, sizeof(c->write));
	c->write.opcode = TIER_STORE_WRITE;
	c->write.flags = TIER_STORE_F_GUARD | TIER_STORE_F_META;
	strcpy(c->write.oid, "ctr");
	c->value = v + 1;
	c->write.buf = &c->value;
	c->write.len = sizeof(c->value);
	c->write.meta = "m";
	c->write.meta_len = 1;
	c->write.expect_version = v;
	c->write.version = v + 1;
	c->write.cb = client_write_done;
	c->write.priv = c;
	assert_int_equal(tier_store_submit(c->e->st, &c->write), 0);
}

static void test_guarded_increments_race_one_winner_per_version(void **state)
{
	struct env *e = *state;
	struct tier_local_opts o = { .workers = 8 };
	static struct client cl[N_CLIENTS];
	int winners[N_CLIENTS * PER_CLIENT + 2] = { 0 }, total = 0, cancels = 0;
	struct tier_store_op op;
	uint64_t value = 0;
	uint64_t start = now_ns();

	setenv("TIER_LOCAL_TEST_GUARD_HOLD_US", "300", 1);
	reopen(e, &o);
	unsetenv("TIER_LOCAL_TEST_GUARD_HOLD_US");
	assert_int_equal(put(e, "ctr", 0, &value, sizeof(value), 0, "m", 0), 8);
	for (int i = 0; i < N_CLIENTS; i++) {
		memset(&cl[i], 0, sizeof(cl[i]));
		cl[i].e = e;
		cl[i].winners = winners;
		cl[i].total = &total;
		client_restat(&cl[i]);
	}
	while (total < N_CLIENTS * PER_CLIENT && now_ns() - start < 20000000000ull) {
		tier_cq_wait(e->cq, 1000);
		tier_cq_drain(e->cq);
	}
	while (tier_store_in_flight(e->st)) {
		tier_cq_wait(e->cq, 100);
		tier_cq_drain(e->cq);
	}
	assert_int_equal(total, N_CLIENTS * PER_CLIENT);
	for (int v = 1; v <= N_CLIENTS * PER_CLIENT; v++)
		assert_int_equal(winners[v], 1);
	for (int i = 0; i < N_CLIENTS; i++)
		cancels += cl[i].cancels;
	/* the clients really raced (else this test proves nothing) */
	assert_true(cancels > 0);
	assert_int_equal(stat_obj(e, "ctr", &op, NULL), 0);
	assert_int_equal(op.obj_version, N_CLIENTS * PER_CLIENT);
	assert_int_equal(get(e, "ctr", 0, &value, sizeof(value)), 8);
	assert_int_equal(value, N_CLIENTS * PER_CLIENT);
}

#define ROUNDS 4
#define CONTENDERS 8
#define PAYLOAD (64 * 1024)

/*
 * Each round, CONTENDERS guarded writes expecting the same version are
 * submitted at once; the store's test hook holds each op 2 ms between its
 * guard check and its effect, so a guard that is not atomic with its write
 * lets several of them through.
 */
static void test_batched_guarded_writes_one_winner_per_round(void **state)
{
	struct env *e = *state;
	struct tier_local_opts o = { .workers = 8 };
	static struct tier_store_op ops[CONTENDERS];
	static uint8_t payload[CONTENDERS][PAYLOAD], back[PAYLOAD];
	struct tier_store_op st;
	int winner = -1;

	setenv("TIER_LOCAL_TEST_GUARD_HOLD_US", "2000", 1);
	reopen(e, &o);
	unsetenv("TIER_LOCAL_TEST_GUARD_HOLD_US");
	assert_int_equal(put(e, "ctr", 0, "x", 1, 0, "m", 0), 1);
	for (int i = 0; i < CONTENDERS; i++)
		memset(payload[i], 'a' + i, PAYLOAD);
	for (uint64_t v = 0; v < ROUNDS; v++) {
		int done = 0, wins = 0;

		for (int i = 0; i < CONTENDERS; i++) {
			memset(&ops[i], 0, sizeof(ops[i]));
			ops[i].opcode = TIER_STORE_WRITE;
			ops[i].flags = TIER_STORE_F_GUARD | TIER_STORE_F_META;
			strcpy(ops[i].oid, "ctr");
			ops[i].buf = payload[i];
			ops[i].len = PAYLOAD;
			ops[i].meta = "m";
			ops[i].meta_len = 1;
			ops[i].expect_version = v;
			ops[i].version = v + 1;
			ops[i].cb = count_done;
			ops[i].priv = &done;
			assert_int_equal(tier_store_submit(e->st, &ops[i]), 0);
		}
		while (done < CONTENDERS) {
			tier_cq_wait(e->cq, 1000);
			tier_cq_drain(e->cq);
		}
		for (int i = 0; i < CONTENDERS; i++) {
			if (ops[i].result == PAYLOAD) {
				wins++;
				winner = i;
			} else {
				assert_int_equal(ops[i].result, -ECANCELED);
			}
		}
		assert_int_equal(wins, 1);
	}
	assert_int_equal(stat_obj(e, "ctr", &st, NULL), 0);
	assert_int_equal(st.obj_version, ROUNDS);
	/* the bytes are the last winner's, untouched by the losers */
	assert_int_equal(get(e, "ctr", 0, back, PAYLOAD), PAYLOAD);
	assert_memory_equal(back, payload[winner], PAYLOAD);
}

static void test_racing_exclusive_creates_one_wins(void **state)
{
	struct env *e = *state;
	struct tier_local_opts o = { .workers = 8 };
	static struct tier_store_op ops[16];
	int done = 0, ok = 0, exist = 0;

	setenv("TIER_LOCAL_TEST_GUARD_HOLD_US", "2000", 1);
	reopen(e, &o);
	unsetenv("TIER_LOCAL_TEST_GUARD_HOLD_US");
	for (int i = 0; i < 16; i++) {
		memset(&ops[i], 0, sizeof(ops[i]));
		ops[i].opcode = TIER_STORE_SETMETA;
		ops[i].flags = TIER_STORE_F_META | TIER_STORE_F_CREATE | TIER_STORE_F_EXCL;
		strcpy(ops[i].oid, "excl");
		ops[i].meta = "m";
		ops[i].meta_len = 1;
		ops[i].version = (uint64_t)i + 1;
		ops[i].cb = count_done;
		ops[i].priv = &done;
		assert_int_equal(tier_store_submit(e->st, &ops[i]), 0);
	}
	while (done < 16) {
		tier_cq_wait(e->cq, 1000);
		tier_cq_drain(e->cq);
	}
	for (int i = 0; i < 16; i++) {
		ok += ops[i].result == 0;
		exist += ops[i].result == -EEXIST;
	}
	assert_int_equal(ok, 1);
	assert_int_equal(exist, 15);
}

/* ---- device model in real time ---- */

struct timed {
	uint64_t t_done;
	int *done;
};

static void timed_done(struct tier_store_op *op)
{
	struct timed *t = op->priv;

	t->t_done = now_ns();
	(*t->done)++;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void test_hdd_model_paces_completions(void **state)
{
	struct env *e = *state;
	struct tier_local_opts o = { .workers = 2 };
	static struct tier_store_op ops[8];
	static struct timed tm[8];
	uint64_t t_done[8], t0, xfer = ((1ull << 20) * 1000000000ull + 149999999) / 150000000;
	uint8_t *buf = calloc(1, 1 << 20);
	int done = 0;

	assert_non_null(buf);
	assert_int_equal(tier_devmodel_profile("hdd", &o.model), 0);
	reopen(e, &o);
	t0 = now_ns();
	for (int i = 0; i < 8; i++) {
		memset(&ops[i], 0, sizeof(ops[i]));
		ops[i].opcode = TIER_STORE_WRITE;
		snprintf(ops[i].oid, sizeof(ops[i].oid), "big.%d", i);
		ops[i].buf = buf;
		ops[i].len = 1 << 20;
		ops[i].cb = timed_done;
		tm[i].done = &done;
		ops[i].priv = &tm[i];
		assert_int_equal(tier_store_submit(e->st, &ops[i]), 0);
	}
	while (done < 8) {
		tier_cq_wait(e->cq, 1000);
		tier_cq_drain(e->cq);
	}
	for (int i = 0; i < 8; i++) {
		assert_int_equal(ops[i].result, 1 << 20);
		t_done[i] = tm[i].t_done;
	}
	qsort(t_done, 8, sizeof(t_done[0]), cmp_u64);
	/* latencies overlap (16 servers), the 150 MB/s channel serialises */
	for (int i = 0; i < 8; i++)
		assert_true(t_done[i] >= t0 + 5000000ull + (uint64_t)(i + 1) * xfer);
	/* about 61 ms in the model; a loaded 2-core box gets 300 ms of slack */
	assert_true(t_done[7] <= t0 + 5000000ull + 8 * xfer + 300000000ull);
	free(buf);
}

/*
 * One worker, a slow write submitted before quick reads: the reads must not
 * wait behind the write's modelled 100 ms (a worker sleeping out each op's
 * service time would make them).
 */
static void test_one_worker_does_not_cap_modelled_queue_depth(void **state)
{
	struct env *e = *state;
	struct tier_local_opts o = { .workers = 1 };
	static struct tier_store_op ops[9];
	static struct timed tm[9];
	static char bufs[9][8];
	uint64_t t0;
	int done = 0;

	o.model.read_latency_us = 1000;
	o.model.write_latency_us = 100000;
	o.model.queue_depth = 16;
	assert_int_equal(put(e, "q", 0, "abcdefgh", 8, 0, NULL, 0), 8);
	reopen(e, &o);
	t0 = now_ns();
	for (int i = 0; i < 9; i++) {
		memset(&ops[i], 0, sizeof(ops[i]));
		ops[i].opcode = i == 0 ? TIER_STORE_WRITE : TIER_STORE_READ;
		strcpy(ops[i].oid, i == 0 ? "slow" : "q");
		ops[i].buf = bufs[i];
		ops[i].len = 8;
		ops[i].cb = timed_done;
		tm[i].done = &done;
		ops[i].priv = &tm[i];
		assert_int_equal(tier_store_submit(e->st, &ops[i]), 0);
	}
	while (done < 9) {
		tier_cq_wait(e->cq, 1000);
		tier_cq_drain(e->cq);
	}
	assert_int_equal(ops[0].result, 8);
	assert_true(tm[0].t_done >= t0 + 100000000ull);
	for (int i = 1; i < 9; i++) {
		assert_int_equal(ops[i].result, 8);
		assert_memory_equal(bufs[i], "abcdefgh", 8);
		assert_true(tm[i].t_done >= t0 + 1000000ull);
		/* modelled at ~1 ms; 60 ms of slack for a loaded box */
		assert_true(tm[i].t_done <= t0 + 60000000ull);
		assert_true(tm[i].t_done < tm[0].t_done);
	}
}

static void test_fault_added_latency_delays_completion(void **state)
{
	struct env *e = *state;
	struct tier_store_fault f = { .add_latency_us = 30000 };
	char buf[4];
	uint64_t t0;

	assert_int_equal(put(e, "lat", 0, "abcd", 4, 0, NULL, 0), 4);
	tier_store_set_fault(e->st, &f);
	t0 = now_ns();
	assert_int_equal(get(e, "lat", 0, buf, 4), 4);
	assert_true(now_ns() - t0 >= 30000000ull);
	tier_store_set_fault(e->st, NULL);
}

static void test_direct_io_aligned_and_unaligned(void **state)
{
	struct env *e = *state;
	struct tier_local_opts o = { .direct_io = true };
	uint8_t *a = NULL, *b = NULL, small[100];

	assert_int_equal(posix_memalign((void **)&a, 4096, 16384), 0);
	assert_int_equal(posix_memalign((void **)&b, 4096, 16384), 0);
	reopen(e, &o);
	for (int i = 0; i < 16384; i++)
		a[i] = (uint8_t)(i * 31);
	assert_int_equal(put(e, "d", 4096, a, 8192, TIER_STORE_F_FUA, "m", 1), 8192);
	/* unaligned write goes buffered; both paths see each other's bytes */
	assert_int_equal(put(e, "d", 4100, "XY", 2, 0, NULL, 0), 2);
	a[4] = 'X';
	a[5] = 'Y';
	memset(b, 0xEE, 16384);
	assert_int_equal(get(e, "d", 4096, b, 12288), 12288);
	assert_memory_equal(b, a, 8192);
	for (int i = 8192; i < 12288; i++)
		assert_int_equal(b[i], 0);
	assert_int_equal(get(e, "d", 4099, small, sizeof(small)), sizeof(small));
	assert_memory_equal(small, a + 3, sizeof(small));
	free(a);
	free(b);
}

/* ---- crash order: pre_meta (dirty), data, meta ---- */

static void crash_case(struct env *e, uint64_t steps, bool sidecar)
{
	struct tier_local_opts crash = { .crash_after_steps = steps };
	static uint8_t oldd[4096], newd[4096], back[4096];
	struct tier_store_op op;
	char meta[256], path[256];
	bool new_data, old_meta, dirty, new_meta;

	if (sidecar)
		setenv("TIER_LOCAL_FORCE_SIDECAR", "1", 1);
	reopen(e, NULL);
	memset(oldd, 'O', sizeof(oldd));
	memset(newd, 'N', sizeof(newd));
	assert_int_equal(put(e, "obj", 0, oldd, 4096, 0, "clean-v1", 1), 4096);

	reopen(e, &crash);
	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_WRITE;
	op.flags = TIER_STORE_F_META | TIER_STORE_F_FUA;
	strcpy(op.oid, "obj");
	op.buf = newd;
	op.len = 4096;
	op.pre_meta = "dirty-v2";
	op.pre_meta_len = 8;
	op.meta = "clean-v2";
	op.meta_len = 8;
	op.version = 2;
	/* the process "dies" during or right after the op: never acknowledged */
	assert_int_equal(run(e, &op), -EIO);
	/* and writes nothing more */
	assert_int_equal(put(e, "later", 0, "x", 1, 0, NULL, 0), -EIO);
	snprintf(path, sizeof(path), "%s/later", e->pool);
	assert_int_equal(access(path, F_OK), -1);

	reopen(e, NULL);
	unsetenv("TIER_LOCAL_FORCE_SIDECAR");
	assert_int_equal(get(e, "obj", 0, back, 4096), 4096);
	assert_int_equal(stat_obj(e, "obj", &op, meta), 0);
	new_data = memcmp(back, newd, 4096) == 0;
	assert_true(new_data || memcmp(back, oldd, 4096) == 0);
	old_meta = strcmp(meta, "clean-v1") == 0;
	dirty = strcmp(meta, "dirty-v2") == 0;
	new_meta = strcmp(meta, "clean-v2") == 0;
	assert_true(old_meta || dirty || new_meta);
	/* the invariant: never the new data under the old clean meta */
	assert_false(new_data && old_meta);
	/* and exactly the state each crash point implies */
	switch (steps) {
	case 1: assert_true(dirty && !new_data); break;
	case 2: assert_true(dirty && new_data); break;
	default: assert_true(new_meta && new_data); break;
	}
	assert_int_equal(simple(e, TIER_STORE_REMOVE, "obj", 0), 0);
}

static void test_crash_order_xattr(void **state)
{
	for (uint64_t n = 1; n <= 3; n++)
		crash_case(*state, n, false);
}

static void test_crash_order_sidecar(void **state)
{
	for (uint64_t n = 1; n <= 3; n++)
		crash_case(*state, n, true);
}

/* Descriptors the process holds under the pool directory (/proc/self/fd). */
static int pool_fds(const struct env *e)
{
	char link[64], target[4096];
	int n = 0;

	for (int fd = 0; fd < 65536; fd++) {
		ssize_t k;

		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		k = readlink(link, target, sizeof(target) - 1);
		if (k <= 0)
			continue;
		target[k] = 0;
		if (!strncmp(target, e->pool, strlen(e->pool)) && target[strlen(e->pool)] == '/')
			n++;
	}
	return n;
}

static void reopen_with_cap(struct env *e, unsigned cap)
{
	struct tier_local_opts o = { .max_open_files = cap };

	close_store(e);
	assert_int_equal(open_store(e, &o), 0);
}

/* Object files stay open between ops, never more than max_open_files. */
static void test_open_files_are_cached_and_bounded(void **state)
{
	struct env *e = *state;
	char oid[32], buf[8];

	reopen_with_cap(e, 8);
	for (int i = 0; i < 40; i++) {
		snprintf(oid, sizeof(oid), "o%d", i);
		assert_int_equal(put(e, oid, 0, "abcdefgh", 8, 0, "m", 1), 8);
		assert_int_equal(get(e, oid, 0, buf, 8), 8);
		assert_true(pool_fds(e) <= 8);
	}
	assert_int_equal(pool_fds(e), 8);
	for (int i = 0; i < 40; i++) {   /* evicted ones reopen */
		snprintf(oid, sizeof(oid), "o%d", i);
		assert_int_equal(get(e, oid, 0, buf, 8), 8);
		assert_memory_equal(buf, "abcdefgh", 8);
	}
	close_store(e);
	assert_int_equal(pool_fds(e), 0);
}

/* A removed object's cached descriptor is never used again: no stale data. */
static void test_remove_forgets_the_cached_descriptor(void **state)
{
	struct env *e = *state;
	char buf[8];

	assert_int_equal(put(e, "obj", 0, "oldoldol", 8, 0, "m", 1), 8);
	assert_int_equal(get(e, "obj", 0, buf, 8), 8);
	assert_int_equal(simple(e, TIER_STORE_REMOVE, "obj", 0), 0);
	assert_int_equal(get(e, "obj", 0, buf, 8), -ENOENT);
	assert_int_equal(put(e, "obj", 4, "new!", 4, 0, "m", 2), 4);
	memset(buf, 'x', sizeof(buf));
	assert_int_equal(get(e, "obj", 0, buf, 8), 8);
	assert_memory_equal(buf, "\0\0\0\0new!", 8);
	assert_int_equal(pool_fds(e), 1);
}

/*
 * The process runs out of descriptors (sockets, say) while the cache holds
 * some: ops on other objects still succeed, because the backend closes an
 * idle cached descriptor and retries instead of failing with EMFILE (which a
 * client would see as EIO).
 */
static void test_descriptor_exhaustion_does_not_fail_ops(void **state)
{
	struct env *e = *state;
	struct rlimit old, low;
	int hog[1024], nhog = 0;
	char oid[32], buf[8];

	reopen_with_cap(e, 16);
	for (int i = 0; i < 16; i++) {
		snprintf(oid, sizeof(oid), "o%d", i);
		assert_int_equal(put(e, oid, 0, "abcdefgh", 8, 0, "m", 1), 8);
	}
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = 512;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	while (nhog < 1024) {
		int fd = dup(0);

		if (fd < 0)
			break;
		hog[nhog++] = fd;
	}
	assert_int_equal(errno, EMFILE);
	/* a new object and an uncached one: both need a descriptor */
	assert_int_equal(put(e, "fresh", 0, "12345678", 8, 0, "m", 1), 8);
	assert_int_equal(get(e, "fresh", 0, buf, 8), 8);
	assert_memory_equal(buf, "12345678", 8);
	for (int i = 0; i < 16; i++) {
		snprintf(oid, sizeof(oid), "o%d", i);
		assert_int_equal(get(e, oid, 0, buf, 8), 8);
		assert_memory_equal(buf, "abcdefgh", 8);
	}
	while (nhog)
		close(hog[--nhog]);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
}

/* ---- pending ranges (F_ORDERED without a sync; local_io.c) ---- */

/* The format field of the object's xattr record: 1 plain, 2 with pending ranges. */
static int rec_format(struct env *e, const char *enc)
{
	char path[256];
	uint8_t rec[16384];
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", e->pool, enc);
	n = getxattr(path, "user.tier.meta", rec, sizeof(rec));
	if (n < 6)
		return -1;
	return rec[4] | rec[5] << 8;
}

/* What a power cut that lost the data would leave: other bytes in the file. */
static void clobber(struct env *e, const char *enc, uint64_t off, uint64_t len)
{
	char path[256];
	uint8_t junk[4096];
	int fd;

	memset(junk, 0xEE, sizeof(junk));
	snprintf(path, sizeof(path), "%s/%s", e->pool, enc);
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_true(len <= sizeof(junk));
	assert_int_equal(pwrite(fd, junk, len, (off_t)off), (ssize_t)len);
	close(fd);
}

#define ORD (TIER_STORE_F_ORDERED)

static void test_ordered_write_lists_range_and_keeps_it_after_restart(void **state)
{
	struct env *e = *state;
	struct tier_store_op op;
	char meta[256], buf[4096], back[4096];

	memset(buf, 'a', sizeof(buf));
	assert_int_equal(put(e, "o", 0, buf, 4096, TIER_STORE_F_EXCL | ORD, "m1", 1), 4096);
	assert_int_equal(rec_format(e, "o"), 2);   /* listed, not synced */
	memset(buf, 'b', sizeof(buf));
	assert_int_equal(put(e, "o", 8192, buf, 4096, ORD, "m2", 2), 4096);
	assert_int_equal(rec_format(e, "o"), 2);
	/* same session: the meta stands as written, nothing is checked */
	assert_int_equal(stat_obj(e, "o", &op, meta), 0);
	assert_string_equal(meta, "m2");
	/* a new session (kill -9: the page cache kept everything) checks and keeps it */
	reopen(e, NULL);
	assert_int_equal(stat_obj(e, "o", &op, meta), 0);
	assert_int_equal(op.obj_version, 2);
	assert_string_equal(meta, "m2");
	assert_int_equal(rec_format(e, "o"), 1);   /* settled, durably */
	assert_int_equal(get(e, "o", 8192, back, 4096), 4096);
	assert_memory_equal(back, buf, 4096);
}

static void test_lost_pending_data_falls_back_to_the_older_meta(void **state)
{
	struct env *e = *state;
	struct tier_store_op op;
	char meta[256], buf[4096];

	memset(buf, 'a', sizeof(buf));
	/* m1 is durable with its data (FUA), then two ranges listed under m2, m3 */
	assert_int_equal(put(e, "o", 0, buf, 4096, TIER_STORE_F_FUA | ORD, "m1", 1), 4096);
	assert_int_equal(rec_format(e, "o"), 1);
	assert_int_equal(put(e, "o", 4096, buf, 4096, ORD, "m2", 2), 4096);
	assert_int_equal(put(e, "o", 16384, buf, 4096, ORD, "m3", 3), 4096);
	assert_int_equal(rec_format(e, "o"), 2);
	close_store(e);
	clobber(e, "o", 16384, 4096);   /* the cut lost the second range's bytes */
	assert_int_equal(open_store(e, NULL), 0);
	assert_int_equal(stat_obj(e, "o", &op, meta), 0);
	assert_int_equal(op.obj_version, 1);
	assert_string_equal(meta, "m1");
	assert_int_equal(rec_format(e, "o"), 1);
	/* and it stays put in the next session, whatever the bytes say */
	reopen(e, NULL);
	assert_int_equal(stat_obj(e, "o", &op, meta), 0);
	assert_string_equal(meta, "m1");
}

static void test_lost_pending_data_of_a_new_copy_removes_it(void **state)
{
	struct env *e = *state;
	struct tier_store_op op;
	char meta[256], buf[4096], path[256];

	memset(buf, 'a', sizeof(buf));
	assert_int_equal(put(e, "n", 0, buf, 4096, TIER_STORE_F_EXCL | ORD, "m1", 1), 4096);
	close_store(e);
	clobber(e, "n", 0, 100);
	assert_int_equal(open_store(e, NULL), 0);
	assert_int_equal(stat_obj(e, "n", &op, meta), -ENOENT);
	snprintf(path, sizeof(path), "%s/n", e->pool);
	assert_int_equal(access(path, F_OK), -1);
}

static void test_overwrite_of_pending_range_settles_first(void **state)
{
	struct env *e = *state;
	struct tier_store_op op;
	char meta[256], buf[4096];

	memset(buf, 'a', sizeof(buf));
	assert_int_equal(put(e, "o", 0, buf, 4096, TIER_STORE_F_EXCL | ORD, "m1", 1), 4096);
	assert_int_equal(rec_format(e, "o"), 2);
	/* a plain overwrite of the listed range: data synced, list dropped first */
	memset(buf, 'b', sizeof(buf));
	assert_int_equal(put(e, "o", 0, buf, 4096, 0, "m2", 2), 4096);
	assert_int_equal(rec_format(e, "o"), 1);
	/* nothing is checked any more: clobbered bytes (a torn overwrite) keep m2 */
	close_store(e);
	clobber(e, "o", 0, 100);
	assert_int_equal(open_store(e, NULL), 0);
	assert_int_equal(stat_obj(e, "o", &op, meta), 0);
	assert_string_equal(meta, "m2");
	/* a write elsewhere keeps the list of others: a new range after a plain write */
	assert_int_equal(put(e, "o", 8192, buf, 4096, ORD, "m3", 3), 4096);
	assert_int_equal(put(e, "o", 0, buf, 100, 0, "m4", 4), 100);
	assert_int_equal(rec_format(e, "o"), 2);
}

/*
 * A write hit skips reading the record when the store knows it holds no
 * pending ranges (local_io.c rec_plain, kept with the cached descriptor).
 * What it must not skip: a record that an F_ORDERED write made list a range
 * since, through the same cached descriptor; the plain write after it must
 * read it and keep the list (a write that believed the record plain would
 * store format 1 and drop the range's fallback).
 */
static void test_plain_writes_after_an_ordered_one_keep_its_list(void **state)
{
	struct env *e = *state;
	struct tier_store_op op;
	char meta[256], buf[4096];

	memset(buf, 'a', sizeof(buf));
	assert_int_equal(put(e, "o", 0, buf, 4096, TIER_STORE_F_EXCL | TIER_STORE_F_FUA, "m1", 1),
			 4096);
	assert_int_equal(put(e, "o", 0, buf, 4096, 0, "m2", 2), 4096);
	assert_int_equal(put(e, "o", 4096, buf, 4096, 0, "m3", 3), 4096);
	assert_int_equal(rec_format(e, "o"), 1);
	assert_int_equal(put(e, "o", 8192, buf, 4096, ORD, "m4", 4), 4096);
	assert_int_equal(rec_format(e, "o"), 2);
	assert_int_equal(put(e, "o", 0, buf, 4096, 0, "m5", 5), 4096);
	assert_int_equal(put(e, "o", 4096, buf, 4096, 0, "m6", 6), 4096);
	assert_int_equal(rec_format(e, "o"), 2);   /* the range of m4 still listed */
	assert_int_equal(stat_obj(e, "o", &op, meta), 0);
	assert_string_equal(meta, "m6");
	/* a lost range falls back to m3, the meta before the first listed one */
	close_store(e);
	clobber(e, "o", 8192, 4096);
	assert_int_equal(open_store(e, NULL), 0);
	assert_int_equal(stat_obj(e, "o", &op, meta), 0);
	assert_string_equal(meta, "m3");
}

static void test_sync_barrier_and_ordered_setmeta_drop_the_list(void **state)
{
	struct env *e = *state;
	struct tier_store_op op = { .opcode = TIER_STORE_READ, .flags = TIER_STORE_F_FUA,
				    .off = 0, .len = 4096 };
	char buf[4096];

	memset(buf, 'a', sizeof(buf));
	assert_int_equal(put(e, "o", 0, buf, 4096, TIER_STORE_F_EXCL | ORD, "m1", 1), 4096);
	assert_int_equal(rec_format(e, "o"), 2);
	strcpy(op.oid, "o");
	op.buf = buf;
	assert_int_equal(run(e, &op), 4096);
	assert_int_equal(rec_format(e, "o"), 1);
	assert_int_equal(put(e, "o", 4096, buf, 4096, ORD, "m2", 2), 4096);
	assert_int_equal(rec_format(e, "o"), 2);
	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_SETMETA;
	op.flags = TIER_STORE_F_META | ORD;
	strcpy(op.oid, "o");
	op.meta = "clean";
	op.meta_len = 5;
	op.version = 3;
	assert_int_equal(run(e, &op), 0);
	assert_int_equal(rec_format(e, "o"), 1);
}

static void test_ordered_sync_env_and_limits_sync_instead(void **state)
{
	struct env *e = *state;
	static char big[512 << 10];
	char buf[4096];

	memset(buf, 'a', sizeof(buf));
	/* bigger than a range may be: synced at once */
	assert_int_equal(put(e, "big", 0, big, sizeof(big), TIER_STORE_F_EXCL | ORD, "m", 1),
			 (int)sizeof(big));
	assert_int_equal(rec_format(e, "big"), 1);
	/* 32 ranges listed, the 33rd syncs and starts over */
	for (int i = 0; i < 33; i++)
		assert_int_equal(put(e, "many", (uint64_t)i * 8192, buf, 4096,
				     (i ? 0 : TIER_STORE_F_EXCL) | ORD, "m", (uint64_t)i + 1), 4096);
	assert_int_equal(rec_format(e, "many"), 1);
	assert_int_equal(put(e, "many", 33 * 8192, buf, 4096, ORD, "m", 40), 4096);
	assert_int_equal(rec_format(e, "many"), 2);
	setenv("TIER_LOCAL_ORDERED_SYNC", "1", 1);
	reopen(e, NULL);
	unsetenv("TIER_LOCAL_ORDERED_SYNC");
	assert_int_equal(put(e, "s", 0, buf, 4096, TIER_STORE_F_EXCL | ORD, "m", 1), 4096);
	assert_int_equal(rec_format(e, "s"), 1);
}

static int put_pre(struct env *e, const char *oid, uint64_t off, const void *buf, uint64_t len,
		   uint32_t flags, const char *pre, const char *meta, uint64_t version)
{
	struct tier_store_op op = { .opcode = TIER_STORE_WRITE, .flags = flags | TIER_STORE_F_META,
				    .off = off, .len = len, .buf = (void *)buf,
				    .version = version, .meta = meta,
				    .meta_len = (uint32_t)strlen(meta), .pre_meta = pre,
				    .pre_meta_len = (uint32_t)strlen(pre) };

	snprintf(op.oid, sizeof(op.oid), "%s", oid);
	return run(e, &op);
}

/*
 * A pre_meta (durable: a clean extent becomes dirty) while ranges are
 * listed: the list goes first, or a cut that loses the write's own new
 * range falls back to a meta older than the pre_meta, calling the extent
 * clean over the client's new bytes.  (Found in review.)
 */
static void test_pre_meta_with_ranges_listed_drops_them_first(void **state)
{
	struct env *e = *state;
	struct tier_store_op op;
	char meta[256], buf[8192], path[256];
	uint8_t saved[16384];
	ssize_t n;

	memset(buf, 'A', sizeof(buf));
	assert_int_equal(put(e, "o", 0, buf, 4096, TIER_STORE_F_EXCL | TIER_STORE_F_FUA | ORD,
			     "F-Aclean", 1), 4096);
	memset(buf, 'b', sizeof(buf));
	assert_int_equal(put(e, "o", 8192, buf, 4096, ORD, "M1", 2), 4096);   /* B: listed */
	assert_int_equal(rec_format(e, "o"), 2);
	memset(buf, 'n', sizeof(buf));
	/* over clean A (pre_meta: A dirty, durable) and new C (listed) */
	assert_int_equal(put_pre(e, "o", 0, buf, 8192, ORD, "P-Adirty", "M2", 3), 8192);
	close_store(e);
	clobber(e, "o", 4096, 4096);   /* the cut lost C's bytes, kept A's */
	assert_int_equal(open_store(e, NULL), 0);
	assert_int_equal(stat_obj(e, "o", &op, meta), 0);
	assert_string_not_equal(meta, "F-Aclean");
	assert_string_equal(meta, "P-Adirty");   /* A stays dirty: its new bytes are the client's */

	/* the same through the settle: the record the pre_meta synced must not list B */
	teardown(state);
	setup(state);
	e = *state;
	memset(buf, 'A', sizeof(buf));
	assert_int_equal(put(e, "o", 0, buf, 4096, TIER_STORE_F_EXCL | TIER_STORE_F_FUA | ORD,
			     "F-Aclean", 1), 4096);
	memset(buf, 'b', sizeof(buf));
	assert_int_equal(put(e, "o", 8192, buf, 4096, ORD, "M1", 2), 4096);
	memset(buf, 'n', sizeof(buf));
	assert_int_equal(put_pre(e, "o", 0, buf, 4096, 0, "P-Adirty", "M2", 3), 4096);
	snprintf(path, sizeof(path), "%s/o", e->pool);
	n = getxattr(path, "user.tier.meta", saved, sizeof(saved));   /* what the pre_meta synced */
	assert_true(n > 0);
	memset(buf, 'c', sizeof(buf));
	assert_int_equal(put(e, "o", 8192, buf, 4096, 0, "M3", 4), 4096);
	close_store(e);
	/* the cut: the xattr goes back to its last fsynced value */
	assert_int_equal(setxattr(path, "user.tier.meta", saved, (size_t)n, 0), 0);
	assert_int_equal(open_store(e, NULL), 0);
	assert_int_equal(stat_obj(e, "o", &op, meta), 0);
	assert_string_not_equal(meta, "F-Aclean");
}

/* ---- a partial eviction over pending ranges (evict_ext.c, do_setmeta) ---- */

#define PE_E 0ull                  /* extents of object "pe": dropped, then rewritten */
#define PE_K 4096ull               /* kept (a client's write) */
#define PE_D 8192ull               /* dropped */

static int pe_setmeta(struct env *e, const char *meta, uint64_t version)
{
	struct tier_store_op op = { .opcode = TIER_STORE_SETMETA,
				    .flags = TIER_STORE_F_META | TIER_STORE_F_GUARD |
					     TIER_STORE_F_FUA,
				    .meta = meta, .meta_len = (uint32_t)strlen(meta),
				    .version = version, .expect_version = version };

	strcpy(op.oid, "pe");
	return run(e, &op);
}

static int pe_zero(struct env *e, uint64_t off, uint64_t version)
{
	struct tier_store_op op = { .opcode = TIER_STORE_ZERO, .flags = TIER_STORE_F_GUARD,
				    .off = off, .len = 4096, .expect_version = version };

	strcpy(op.oid, "pe");
	return run(e, &op);
}

/* A cut that lost a ZERO: the extent's bytes as they were. */
static void pe_bytes(struct env *e, uint64_t off, char c)
{
	char path[256], buf[4096];
	int fd;

	memset(buf, c, sizeof(buf));
	snprintf(path, sizeof(path), "%s/pe", e->pool);
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, buf, sizeof(buf), (off_t)off), (ssize_t)sizeof(buf));
	close(fd);
}

/*
 * What the record of "pe" claims after a restart must be true: the meta
 * ("v:" and the extents it calls valid) lists K, which holds the client's
 * bytes; never D, dropped; E only once rewritten, with the new bytes.
 */
static void pe_check(struct env *e, bool rewritten)
{
	struct tier_store_op op;
	char meta[256], buf[4096], want[4096];

	assert_int_equal(stat_obj(e, "pe", &op, meta), 0);
	assert_int_equal(strncmp(meta, "v:", 2), 0);
	assert_null(strchr(meta + 2, 'D'));        /* a dropped extent stays dropped */
	if (strchr(meta + 2, 'E')) {
		assert_true(rewritten);               /* not the dropped bytes (a hole) */
		memset(want, 'e', sizeof(want));
		assert_int_equal(get(e, "pe", PE_E, buf, 4096), 4096);
		assert_memory_equal(buf, want, 4096);
	}
	assert_non_null(strchr(meta + 2, 'K'));    /* an acknowledged write stays */
	memset(want, 'K', sizeof(want));
	assert_int_equal(get(e, "pe", PE_K, buf, 4096), 4096);
	assert_memory_equal(buf, want, 4096);
	assert_int_equal(rec_format(e, "pe"), 1);  /* settled */
}

/*
 * A partial eviction while pending ranges are listed (the engine's
 * sequence: evict_ext.c).  E is durable under "v:E"; K (a client's write)
 * and D (say a fill) are listed, the fallback "v:E".  The eviction drops E
 * and D: a FUA SETMETA "v:K", then ZEROs of E and D (holes).  Variant 1
 * then rewrites E (a new extent, listed).  The SETMETA must sync the data
 * and drop the list (do_setmeta), so that no fallback older than it is
 * left: a record that listed K and D under fallback "v:E" fails D's CRC
 * once D is a hole (a kill -9 is enough), and brings back "v:E": E valid
 * over the hole (or the rewrite's lost bytes) and K, acknowledged, gone.
 * Checked after a kill -9 and after a cut that lost what no sync covered
 * (the ZEROs, the rewrite's bytes), then again in the next session.
 */
static void pe_case(void **state, bool rewrite, bool cut)
{
	struct env *e = *state;
	char buf[4096];

	memset(buf, 'E', sizeof(buf));
	assert_int_equal(put(e, "pe", PE_E, buf, 4096,
			     TIER_STORE_F_EXCL | TIER_STORE_F_FUA | ORD, "v:E", 1), 4096);
	memset(buf, 'K', sizeof(buf));
	assert_int_equal(put(e, "pe", PE_K, buf, 4096, ORD, "v:EK", 2), 4096);
	memset(buf, 'D', sizeof(buf));
	assert_int_equal(put(e, "pe", PE_D, buf, 4096, ORD, "v:EKD", 3), 4096);
	assert_int_equal(rec_format(e, "pe"), 2);
	/* the partial eviction: the record first, durably, then the holes */
	assert_int_equal(pe_setmeta(e, "v:K", 3), 0);
	assert_int_equal(rec_format(e, "pe"), 1);   /* synced: no list, no fallback */
	assert_int_equal(pe_zero(e, PE_E, 3), 0);
	assert_int_equal(pe_zero(e, PE_D, 3), 0);
	if (rewrite) {
		memset(buf, 'e', sizeof(buf));
		assert_int_equal(put(e, "pe", PE_E, buf, 4096, ORD, "v:KE", 4), 4096);
		assert_int_equal(rec_format(e, "pe"), 2);   /* listed, fallback "v:K" */
	}
	close_store(e);
	if (cut) {
		/* nothing synced the holes or the rewrite: the cut lost them */
		pe_bytes(e, PE_D, 'D');
		if (rewrite)
			clobber(e, "pe", PE_E, 4096);   /* torn */
		else
			pe_bytes(e, PE_E, 'E');
	}
	assert_int_equal(open_store(e, NULL), 0);
	pe_check(e, rewrite);
	reopen(e, NULL);
	pe_check(e, rewrite);
}

static void test_partial_eviction_over_pending_ranges(void **state)
{
	for (int i = 0; i < 4; i++) {
		if (i) {
			teardown(state);
			setup(state);
		}
		pe_case(state, i & 1, i & 2);
	}
}

static void test_sidecar_only_pools_sync_instead(void **state)
{
	struct env *e = *state;
	char buf[4096], path[256];
	uint8_t rec[64];
	int fd;

	setenv("TIER_LOCAL_FORCE_SIDECAR", "1", 1);
	reopen(e, NULL);
	unsetenv("TIER_LOCAL_FORCE_SIDECAR");
	memset(buf, 'a', sizeof(buf));
	assert_int_equal(put(e, "o", 0, buf, 4096, TIER_STORE_F_EXCL | ORD, "m1", 1), 4096);
	snprintf(path, sizeof(path), "%s/.o.meta", e->pool);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_true(read(fd, rec, sizeof(rec)) >= 6);
	close(fd);
	assert_int_equal(rec[4] | rec[5] << 8, 1);   /* a sidecar write syncs anyway: no list */
}

/* The descriptor LRU directly (libtier/store/local_fd.c, internal). */
struct tier__fdcache;
int tier__fdc_create(size_t cap, struct tier__fdcache **out);
void tier__fdc_destroy(struct tier__fdcache *f);
int tier__fdc_get(struct tier__fdcache *f, const char *name, bool direct);
void tier__fdc_put(struct tier__fdcache *f, const char *name, bool direct, int fd);
uint64_t tier__hash_str(const char *s);

/*
 * A put that evicts the entry whose chain link it is about to fill: two
 * names in one bucket, a cache of one.  The put must look its slot up again
 * after the eviction (ASan: heap-use-after-free otherwise).
 */
static void test_fd_cache_put_after_evicting_its_bucket_neighbour(void **state)
{
	struct tier__fdcache *f;
	char a[32] = "obj-0", b[32];
	int fda, fdb;
	(void)state;

	/* cap 1: 64 buckets; find b in a's bucket */
	for (int i = 1;; i++) {
		snprintf(b, sizeof(b), "obj-%d", i);
		if ((tier__hash_str(b) & 63) == (tier__hash_str(a) & 63))
			break;
	}
	assert_int_equal(tier__fdc_create(1, &f), 0);
	fda = open("/dev/null", O_RDONLY);
	fdb = open("/dev/null", O_RDONLY);
	assert_true(fda >= 0 && fdb >= 0);
	tier__fdc_put(f, a, false, fda);          /* cached, idle */
	tier__fdc_put(f, b, false, fdb);          /* evicts a, caches b */
	assert_int_equal(tier__fdc_get(f, a, false), -ENOENT);
	assert_int_equal(tier__fdc_get(f, b, false), fdb);
	tier__fdc_put(f, b, false, fdb);
	tier__fdc_destroy(f);
}

/* ---- SCAN: pages of names with their version and meta ---- */

struct seen {
	unsigned count[400];
	uint64_t version[400];
	char meta[400][16];
	int result[400];
	unsigned other;   /* entries outside the prefix (must stay 0) */
};

/* SCAN every shard of prefix "img." page by page into *sn. */
static void scan_all(struct env *e, uint32_t nshards, uint64_t page, struct seen *sn)
{
	if (!tier_store_can_scan(e->st)) {
		print_message("no SCAN on this filesystem (its directory offsets may shift)\n");
		skip();
	}
	memset(sn, 0, sizeof(*sn));
	for (uint32_t sh = 0; sh < (nshards ? nshards : 1); sh++) {
		uint64_t cursor = 0;

		do {
			struct tier_store_op op = { .opcode = TIER_STORE_SCAN, .prefix = "img.",
						    .len = page, .cursor = cursor, .shard = sh,
						    .nshards = nshards };
			int rc = run(e, &op);

			assert_true(rc >= 0);
			assert_int_equal((size_t)rc, op.n_entries);
			assert_true(op.n_entries <= page);
			for (size_t i = 0; i < op.n_entries; i++) {
				const struct tier_store_entry *en = &op.entries[i];
				unsigned k;

				if (sscanf(en->name, "img.%u", &k) != 1 || k >= 400) {
					sn->other++;
					continue;
				}
				sn->count[k]++;
				sn->result[k] = en->result;
				sn->version[k] = en->version;
				assert_true(en->meta_len < sizeof(sn->meta[k]));
				if (en->meta_len)
					memcpy(sn->meta[k], en->meta, en->meta_len);
			}
			free(op.entries);
			cursor = op.cursor_out;
		} while (cursor);
	}
}

static void lay_out_scan_objects(struct env *e)
{
	char oid[64], meta[16];

	for (unsigned i = 0; i < 300; i++) {
		snprintf(oid, sizeof(oid), "img.%u", i);
		snprintf(meta, sizeof(meta), "m%u", i);
		assert_int_equal(put(e, oid, 0, "x", 1, 0, i == 7 ? NULL : meta, i + 1), 1);
	}
	assert_int_equal(put(e, "other.1", 0, "x", 1, 0, "mo", 1), 1);
	assert_int_equal(put(e, "im", 0, "x", 1, 0, "mo", 1), 1);
}

static void check_scan_objects(const struct seen *sn)
{
	assert_int_equal(sn->other, 0);
	for (unsigned i = 0; i < 300; i++) {
		char want[16];

		assert_int_equal(sn->count[i], 1);
		assert_int_equal(sn->result[i], 0);
		if (i == 7) {   /* written without meta: none, as a STAT says */
			assert_string_equal(sn->meta[i], "");
			continue;
		}
		snprintf(want, sizeof(want), "m%u", i);
		assert_int_equal(sn->version[i], i + 1);
		assert_string_equal(sn->meta[i], want);
	}
	for (unsigned i = 300; i < 400; i++)
		assert_int_equal(sn->count[i], 0);
}

static void test_scan_pages_and_shards_give_every_object_once(void **state)
{
	struct env *e = *state;
	struct seen sn;

	lay_out_scan_objects(e);
	scan_all(e, 0, 1000, &sn);     /* one page */
	check_scan_objects(&sn);
	scan_all(e, 0, 7, &sn);        /* pages resumed at their cursors */
	check_scan_objects(&sn);
	scan_all(e, 3, 5, &sn);        /* three shards of small pages */
	check_scan_objects(&sn);
	/* reading each record through the opened file, as without getxattrat(2) */
	setenv("TIER_LOCAL_NO_XATTRAT", "1", 1);
	reopen(e, NULL);
	unsetenv("TIER_LOCAL_NO_XATTRAT");
	scan_all(e, 2, 9, &sn);
	check_scan_objects(&sn);
	/* and from sidecars */
	close_store(e);
	setenv("TIER_LOCAL_FORCE_SIDECAR", "1", 1);
	teardown(state);
	setup(state);
	e = *state;
	lay_out_scan_objects(e);
	unsetenv("TIER_LOCAL_FORCE_SIDECAR");
	reopen(e, NULL);   /* xattrs usable again: the sidecars are still read */
	scan_all(e, 2, 11, &sn);
	check_scan_objects(&sn);
}

static void test_scan_settles_foreign_records_as_stat_does(void **state)
{
	struct env *e = *state;
	struct seen sn;
	char buf[4096], path[256];

	memset(buf, 'a', sizeof(buf));
	/* img.1: m1 durable, then a range listed under m2 whose bytes a cut loses */
	assert_int_equal(put(e, "img.1", 0, buf, 4096, TIER_STORE_F_FUA | ORD, "m1", 1), 4096);
	assert_int_equal(put(e, "img.1", 4096, buf, 4096, ORD, "m2", 2), 4096);
	/* img.2: a new copy whose only range is lost; img.3: a range that is intact */
	assert_int_equal(put(e, "img.2", 0, buf, 4096, TIER_STORE_F_EXCL | ORD, "m1", 1), 4096);
	assert_int_equal(put(e, "img.3", 0, buf, 4096, TIER_STORE_F_EXCL | ORD, "m3", 3), 4096);
	assert_int_equal(rec_format(e, "img.1"), 2);
	close_store(e);
	clobber(e, "img.1", 4096, 100);
	clobber(e, "img.2", 0, 100);
	assert_int_equal(open_store(e, NULL), 0);
	scan_all(e, 2, 2, &sn);
	assert_int_equal(sn.count[1], 1);
	assert_int_equal(sn.result[1], 0);
	assert_int_equal(sn.version[1], 1);
	assert_string_equal(sn.meta[1], "m1");
	assert_int_equal(rec_format(e, "img.1"), 1);   /* settled, as a STAT leaves it */
	assert_int_equal(sn.count[2], 1);
	assert_int_equal(sn.result[2], -ENOENT);
	snprintf(path, sizeof(path), "%s/img.2", e->pool);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(sn.result[3], 0);
	assert_int_equal(sn.version[3], 3);
	assert_string_equal(sn.meta[3], "m3");
	assert_int_equal(rec_format(e, "img.3"), 1);
}

/* ---- records left in memory (F_LAZY_META; local_io.c "Deferred records") ---- */

#define LAZY (TIER_STORE_F_LAZY_META)

/* The version of the record on disk now: what a kill -9 would leave (0: none). */
static uint64_t disk_version(struct env *e, const char *enc, char *meta)
{
	char path[256];
	uint8_t rec[16384];
	uint64_t v = 0;
	uint32_t len;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", e->pool, enc);
	n = getxattr(path, "user.tier.meta", rec, sizeof(rec));
	if (n < 28)
		return 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | rec[8 + i];
	len = (uint32_t)(rec[24] | rec[25] << 8 | rec[26] << 16 | (uint32_t)rec[27] << 24);
	if (meta) {
		assert_true(len < 256 && 28 + len <= (size_t)n);
		memcpy(meta, rec + 28, len);
		meta[len] = '\0';
	}
	return v;
}

static uint64_t deferred(struct env *e, uint64_t *late)
{
	struct tier_store_stats s;

	tier_store_get_stats(e->st, &s);
	if (late)
		*late = s.meta_stored_late;
	return s.meta_deferred;
}

static int setmeta_guarded(struct env *e, const char *oid, uint64_t expect, const char *meta,
			   uint64_t version)
{
	struct tier_store_op op = { .opcode = TIER_STORE_SETMETA,
				    .flags = TIER_STORE_F_META | TIER_STORE_F_GUARD,
				    .meta = meta, .meta_len = (uint32_t)strlen(meta),
				    .version = version, .expect_version = expect };

	snprintf(op.oid, sizeof(op.oid), "%s", oid);
	return run(e, &op);
}

/*
 * A lazy write over a plain record on a cached descriptor leaves its record
 * in memory (no fsetxattr: the disk keeps the one before, what a kill -9
 * would find), and every op that reads or relies on the record sees the
 * newest: STAT, a guard (the old version fails, the new one passes), the
 * FUA READ barrier (the record is stored before the fsync), SCAN, and the
 * next session after a clean close.
 */
static void test_lazy_meta_is_deferred_and_seen_by_every_op(void **state)
{
	struct env *e = *state;
	struct tier_store_op op;
	struct tier_store_op rd = { .opcode = TIER_STORE_READ, .flags = TIER_STORE_F_FUA,
				    .off = 0, .len = 8 };
	uint64_t late;
	char meta[256], buf[8];

	assert_int_equal(put(e, "img.1", 0, "AAAAAAAA", 8, TIER_STORE_F_EXCL | TIER_STORE_F_FUA,
			     "m1", 1), 8);
	assert_int_equal(put(e, "img.1", 0, "BBBBBBBB", 8, LAZY, "m2", 2), 8);
	assert_int_equal(deferred(e, &late), 1);
	assert_int_equal(late, 0);
	assert_int_equal(disk_version(e, "img.1", meta), 1);   /* a kill here: the older record */
	assert_string_equal(meta, "m1");
	assert_int_equal(get(e, "img.1", 0, buf, 8), 8);         /* a plain read leaves it */
	assert_memory_equal(buf, "BBBBBBBB", 8);
	assert_int_equal(disk_version(e, "img.1", NULL), 1);
	/* STAT: the newest, stored first */
	assert_int_equal(stat_obj(e, "img.1", &op, meta), 0);
	assert_int_equal(op.obj_version, 2);
	assert_string_equal(meta, "m2");
	assert_int_equal(disk_version(e, "img.1", NULL), 2);
	/* guards: judged by the newest version */
	assert_int_equal(put(e, "img.1", 0, "CCCCCCCC", 8, LAZY, "m3", 3), 8);
	assert_int_equal(disk_version(e, "img.1", NULL), 2);
	assert_int_equal(setmeta_guarded(e, "img.1", 2, "bad", 9), -ECANCELED);
	assert_int_equal(setmeta_guarded(e, "img.1", 3, "m4", 4), 0);
	assert_int_equal(disk_version(e, "img.1", meta), 4);
	assert_string_equal(meta, "m4");
	/* the sync barrier stores it (then syncs) */
	assert_int_equal(put(e, "img.1", 0, "DDDDDDDD", 8, LAZY, "m5", 5), 8);
	assert_int_equal(disk_version(e, "img.1", NULL), 4);
	strcpy(rd.oid, "img.1");
	rd.buf = buf;
	assert_int_equal(run(e, &rd), 8);
	assert_int_equal(disk_version(e, "img.1", meta), 5);
	assert_string_equal(meta, "m5");
	/* SCAN reads records by name: the newest */
	assert_int_equal(put(e, "img.1", 0, "EEEEEEEE", 8, LAZY, "m6", 6), 8);
	{
		struct seen sn;

		scan_all(e, 0, 100, &sn);
		assert_int_equal(sn.count[1], 1);
		assert_int_equal(sn.version[1], 6);
		assert_string_equal(sn.meta[1], "m6");
	}
	assert_int_equal(disk_version(e, "img.1", NULL), 6);
	/* a clean close stores it; the next session sees it */
	assert_int_equal(put(e, "img.1", 0, "FFFFFFFF", 8, LAZY, "m7", 7), 8);
	assert_int_equal(deferred(e, &late), 5);
	assert_int_equal(late, 4);   /* by STAT, the SETMETA, the READ FUA and SCAN */
	reopen(e, NULL);
	assert_int_equal(disk_version(e, "img.1", NULL), 7);
	assert_int_equal(stat_obj(e, "img.1", &op, meta), 0);
	assert_int_equal(op.obj_version, 7);
	assert_string_equal(meta, "m7");
	assert_int_equal(get(e, "img.1", 0, buf, 8), 8);
	assert_memory_equal(buf, "FFFFFFFF", 8);
}

/*
 * Where the record is not deferred: a descriptor opened anew (the store
 * does not know the record is plain), a record listing pending ranges (the
 * write must keep the list and its fallback), and a write without the
 * flag.  A later non-lazy write supersedes a deferred record; a REMOVE
 * leaves nothing behind.
 */
static void test_lazy_meta_is_stored_where_the_store_cannot_defer(void **state)
{
	struct env *e = *state;
	struct tier_store_op op;
	char meta[256], buf[4096];

	memset(buf, 'a', sizeof(buf));
	assert_int_equal(put(e, "o", 0, buf, 4096, TIER_STORE_F_EXCL | TIER_STORE_F_FUA, "m1", 1),
			 4096);
	reopen(e, NULL);   /* an uncached descriptor */
	assert_int_equal(put(e, "o", 0, buf, 4096, LAZY, "m2", 2), 4096);
	assert_int_equal(disk_version(e, "o", NULL), 2);
	assert_int_equal(deferred(e, NULL), 0);
	/* pending ranges listed: stored with the list kept */
	assert_int_equal(put(e, "o", 8192, buf, 4096, ORD, "m3", 3), 4096);
	assert_int_equal(rec_format(e, "o"), 2);
	assert_int_equal(put(e, "o", 0, buf, 4096, LAZY, "m4", 4), 4096);
	assert_int_equal(rec_format(e, "o"), 2);
	assert_int_equal(disk_version(e, "o", NULL), 4);
	assert_int_equal(deferred(e, NULL), 0);
	/* a plain record again (the barrier drops the list), then deferred */
	{
		struct tier_store_op rd = { .opcode = TIER_STORE_READ, .flags = TIER_STORE_F_FUA,
					    .off = 0, .len = 4096, .buf = buf };

		strcpy(rd.oid, "o");
		assert_int_equal(run(e, &rd), 4096);
	}
	assert_int_equal(rec_format(e, "o"), 1);
	assert_int_equal(put(e, "o", 0, buf, 4096, LAZY, "m5", 5), 4096);
	assert_int_equal(disk_version(e, "o", NULL), 4);
	assert_int_equal(deferred(e, NULL), 1);
	/* a write without the flag stores its own record (the deferred one is gone) */
	assert_int_equal(put(e, "o", 0, buf, 4096, 0, "m6", 6), 4096);
	assert_int_equal(disk_version(e, "o", meta), 6);
	assert_string_equal(meta, "m6");
	/* closing now stores nothing older over it */
	reopen(e, NULL);
	assert_int_equal(stat_obj(e, "o", &op, meta), 0);
	assert_int_equal(op.obj_version, 6);
	assert_string_equal(meta, "m6");
	/* a REMOVE after a deferred record: gone, and a new object starts clean */
	assert_int_equal(put(e, "o", 0, buf, 4096, 0, "m7", 7), 4096);
	assert_int_equal(put(e, "o", 0, buf, 4096, LAZY, "m8", 8), 4096);
	assert_int_equal(simple(e, TIER_STORE_REMOVE, "o", 0), 0);
	assert_int_equal(stat_obj(e, "o", &op, NULL), -ENOENT);
	assert_int_equal(put(e, "o", 0, buf, 4096, TIER_STORE_F_EXCL, "n1", 1), 4096);
	reopen(e, NULL);
	assert_int_equal(stat_obj(e, "o", &op, meta), 0);
	assert_int_equal(op.obj_version, 1);
	assert_string_equal(meta, "n1");
}

/* A descriptor the cache closes (LRU eviction) has its deferred record stored first. */
static void test_lazy_meta_is_stored_before_its_descriptor_closes(void **state)
{
	struct env *e = *state;
	struct tier_store_op op;
	char oid[32], meta[256];

	reopen_with_cap(e, 2);
	for (int i = 0; i < 6; i++) {
		snprintf(oid, sizeof(oid), "o%d", i);
		assert_int_equal(put(e, oid, 0, "abcdefgh", 8, TIER_STORE_F_EXCL, "m1", 1), 8);
		assert_int_equal(put(e, oid, 0, "ABCDEFGH", 8, LAZY, "m2", 2), 8);
		assert_int_equal(disk_version(e, oid, NULL), 1);
	}
	assert_true(pool_fds(e) <= 2);
	for (int i = 0; i < 4; i++) {   /* evicted: stored as they went */
		snprintf(oid, sizeof(oid), "o%d", i);
		assert_int_equal(disk_version(e, oid, meta), 2);
		assert_string_equal(meta, "m2");
	}
	for (int i = 0; i < 6; i++) {
		snprintf(oid, sizeof(oid), "o%d", i);
		assert_int_equal(stat_obj(e, oid, &op, meta), 0);
		assert_int_equal(op.obj_version, 2);
	}
}

/*
 * A foreign record whose pending data was lost and that has no fallback:
 * the write that finds it removes the copy (settle_foreign) and creates it
 * anew.  A plain READ cached the descriptor first, so the removal frees the
 * cache entry the op's deferred-record pointer lived in; the write's
 * meta_put must not touch it (under ASan: a heap-use-after-free before the
 * pointer was cleared).
 */
static void test_settle_of_a_cached_descriptor_forgets_its_record(void **state)
{
	struct env *e = *state;
	struct tier_store_op op;
	char meta[256], buf[4096];

	memset(buf, 'a', sizeof(buf));
	assert_int_equal(put(e, "n", 0, buf, 4096, TIER_STORE_F_EXCL | ORD, "m1", 1), 4096);
	close_store(e);
	clobber(e, "n", 0, 100);
	assert_int_equal(open_store(e, NULL), 0);
	assert_int_equal(get(e, "n", 0, buf, 8), 8);   /* caches the descriptor, reads no record */
	memset(buf, 'b', sizeof(buf));
	assert_int_equal(put(e, "n", 0, buf, 4096, 0, "m2", 2), 4096);
	assert_int_equal(stat_obj(e, "n", &op, meta), 0);
	assert_int_equal(op.obj_version, 2);
	assert_string_equal(meta, "m2");
	assert_int_equal(get(e, "n", 0, buf, 8), 8);
	assert_memory_equal(buf, "bbbbbbbb", 8);
}

/* FS_IMMUTABLE_FL through FS_IOC_[GS]ETFLAGS; false if the filesystem or the user cannot */
static bool set_immutable(const char *path, bool on)
{
	int fd = open(path, O_RDONLY), flags = 0;
	bool ok;

	if (fd < 0)
		return false;
	ok = ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
	if (ok) {
		flags = on ? flags | FS_IMMUTABLE_FL : flags & ~FS_IMMUTABLE_FL;
		ok = ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
	}
	close(fd);
	return ok;
}

/*
 * A REMOVE that fails before it unlinks (here: its deferred record cannot
 * be stored, the file being immutable) keeps the descriptor and its
 * deferred record: forgetting them would leave the file with the older
 * record, and every later guard at the engine's version would fail
 * (ECANCELED) until a client write stored a new one.
 */
static void test_failed_remove_keeps_the_deferred_record(void **state)
{
	struct env *e = *state;
	struct tier_store_op op;
	char meta[256], path[256];

	assert_int_equal(put(e, "r", 0, "abcdefgh", 8, TIER_STORE_F_EXCL, "m1", 1), 8);
	assert_int_equal(put(e, "r", 0, "ABCDEFGH", 8, LAZY, "m2", 2), 8);
	assert_int_equal(disk_version(e, "r", NULL), 1);
	snprintf(path, sizeof(path), "%s/r", e->pool);
	if (!set_immutable(path, true))
		skip();   /* not root, or a filesystem without the flag */
	assert_int_not_equal(simple(e, TIER_STORE_REMOVE, "r", 0), 0);
	assert_true(set_immutable(path, false));
	assert_int_equal(access(path, F_OK), 0);
	/* the newest record is still the object's: a guard at version 2 passes */
	assert_int_equal(setmeta_guarded(e, "r", 2, "m3", 3), 0);
	assert_int_equal(stat_obj(e, "r", &op, meta), 0);
	assert_int_equal(op.obj_version, 3);
	assert_string_equal(meta, "m3");
	assert_int_equal(simple(e, TIER_STORE_REMOVE, "r", 0), 0);
	assert_int_equal(access(path, F_OK), -1);
}

/*
 * SCAN pages through the directory across opens: only where offsets stay
 * put while names go (else the store lists, and a skipped dirty object
 * would be a lost write after a restart).
 */
static void test_scan_only_on_stable_dir_offsets(void **state)
{
	struct env *v = *state;

	(void)v;
	assert_true(tier__local_dir_offsets_stable(EXT4_SUPER_MAGIC, "6.1.0-18-amd64"));
	assert_true(tier__local_dir_offsets_stable(XFS_SUPER_MAGIC, "5.10.0"));
	assert_true(tier__local_dir_offsets_stable(BTRFS_SUPER_MAGIC, "6.1.0"));
	assert_false(tier__local_dir_offsets_stable(TMPFS_MAGIC, "6.1.0-18-amd64"));
	assert_false(tier__local_dir_offsets_stable(TMPFS_MAGIC, "5.15.0"));
	assert_true(tier__local_dir_offsets_stable(TMPFS_MAGIC, "6.6.0"));
	assert_true(tier__local_dir_offsets_stable(TMPFS_MAGIC, "6.18.3-arch1"));
	assert_true(tier__local_dir_offsets_stable(TMPFS_MAGIC, "7.0"));
	assert_false(tier__local_dir_offsets_stable(TMPFS_MAGIC, NULL));
	assert_false(tier__local_dir_offsets_stable(OVERLAYFS_SUPER_MAGIC, "6.18"));
	assert_false(tier__local_dir_offsets_stable(NFS_SUPER_MAGIC, "6.18"));
	/* and the store offers SCAN exactly then (the test's own pool) */
	{
		struct statfs sfs;
		struct utsname u;

		assert_int_equal(statfs(v->pool, &sfs), 0);
		assert_int_equal(uname(&u), 0);
		assert_int_equal(tier_store_can_scan(v->st),
				 tier__local_dir_offsets_stable((long)sfs.f_type, u.release));
	}
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_write_read_roundtrip_zero_fills_past_eof),
		T(test_scan_only_on_stable_dir_offsets),
		T(test_absent_objects_are_enoent),
		T(test_stat_reports_size_version_mtime_meta),
		T(test_zero_punches_and_extends),
		T(test_remove_deletes_data_and_meta),
		T(test_guards_fail_without_changing_anything),
		T(test_list_prefix_escapes_and_skips_hidden),
		T(test_name_too_long_after_escaping),
		T(test_sidecar_fallback_when_xattrs_refused),
		T(test_max_size_meta_roundtrips),
		T(test_concurrent_ops_on_different_objects),
		T(test_guarded_increments_race_one_winner_per_version),
		T(test_batched_guarded_writes_one_winner_per_round),
		T(test_racing_exclusive_creates_one_wins),
		T(test_hdd_model_paces_completions),
		T(test_one_worker_does_not_cap_modelled_queue_depth),
		T(test_fault_added_latency_delays_completion),
		T(test_direct_io_aligned_and_unaligned),
		T(test_crash_order_xattr),
		T(test_crash_order_sidecar),
		T(test_open_files_are_cached_and_bounded),
		T(test_remove_forgets_the_cached_descriptor),
		T(test_descriptor_exhaustion_does_not_fail_ops),
		T(test_ordered_write_lists_range_and_keeps_it_after_restart),
		T(test_lost_pending_data_falls_back_to_the_older_meta),
		T(test_lost_pending_data_of_a_new_copy_removes_it),
		T(test_plain_writes_after_an_ordered_one_keep_its_list),
		T(test_overwrite_of_pending_range_settles_first),
		T(test_sync_barrier_and_ordered_setmeta_drop_the_list),
		T(test_ordered_sync_env_and_limits_sync_instead),
		T(test_pre_meta_with_ranges_listed_drops_them_first),
		T(test_partial_eviction_over_pending_ranges),
		T(test_sidecar_only_pools_sync_instead),
		T(test_fd_cache_put_after_evicting_its_bucket_neighbour),
		T(test_scan_pages_and_shards_give_every_object_once),
		T(test_scan_settles_foreign_records_as_stat_does),
		T(test_lazy_meta_is_deferred_and_seen_by_every_op),
		T(test_lazy_meta_is_stored_where_the_store_cannot_defer),
		T(test_lazy_meta_is_stored_before_its_descriptor_closes),
		T(test_settle_of_a_cached_descriptor_forgets_its_record),
		T(test_failed_remove_keeps_the_deferred_record),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
