/* SPDX-License-Identifier: MIT */
/*
 * test_gen.c - the tier-sim workload tools: fio-compatible generators
 * (checked against numbers printed by fio-genzipf 3.33), trace parsing of
 * CSV and fio iolog v2/v3 with rejection of malformed lines, and Belady's
 * OPT on sequences small enough to check by hand.
 */
#undef NDEBUG
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../tools/gen.h"
#include "../../tools/opt.h"
#include "../../tools/trace.h"

/* ---- generators ---- */

/*
 * `fio-genzipf -t zipf -i 1.1 -b 4096 -g 3 -c` (fio 3.33, seed 1, 786432
 * draws over 786432 blocks): 107166 distinct blocks hit; the hottest got
 * 97259 hits, the next 45633, rank 100 got 593; the table (-o 10) says the
 * top 10% take 83.94% and the top 20% 87.76%.  A non-power-of-two block
 * count, so the rank hash and the random offset both matter.
 */
static void test_zipf_matches_fio_genzipf(void **state)
{
	struct gen_dist d;
	uint64_t *c = NULL;
	size_t n = 0;

	(void)state;
	assert_int_equal(gen_dist_init(&d, GEN_DIST_ZIPF, 1.1, 786432, 1), 0);
	assert_int_equal(gen_hit_counts(&d, 786432, &c, &n), 0);
	assert_int_equal(n, 107166);
	assert_int_equal(c[0], 97259);
	assert_int_equal(c[1], 45633);
	assert_int_equal(c[100], 593);
	assert_true(fabs(gen_top_share(c, n, 786432, 10, 1) - 0.8394) < 0.00005);
	assert_true(fabs(gen_top_share(c, n, 786432, 10, 2) - 0.8776) < 0.00005);
	free(c);
}

/* Seed 004's own table: -i 1.1 -b 1000000 -g 400: top 10% = 82.86% (fio 2.x). */
static void test_zipf_seed004_shape(void **state)
{
	struct gen_dist d;
	uint64_t *c = NULL, nr = 400ull * 1024 * 1024 * 1024 / 1000000;
	size_t n = 0;

	(void)state;
	assert_int_equal(gen_dist_init(&d, GEN_DIST_ZIPF, 1.1, nr, 1), 0);
	assert_int_equal(gen_hit_counts(&d, nr, &c, &n), 0);
	assert_true(fabs(gen_top_share(c, n, nr, 10, 1) - 0.8286) < 0.002);
	assert_true(fabs(gen_top_share(c, n, nr, 10, 2) - 0.8699) < 0.002);
	free(c);
}

/* `fio-genzipf -t pareto -i 0.9 -b 4096 -g 3 -c`: 125137 distinct, top 38 hits. */
static void test_pareto_matches_fio_genzipf(void **state)
{
	struct gen_dist d;
	uint64_t *c = NULL;
	size_t n = 0;

	(void)state;
	assert_int_equal(gen_dist_init(&d, GEN_DIST_PARETO, 0.9, 786432, 1), 0);
	assert_int_equal(gen_hit_counts(&d, 786432, &c, &n), 0);
	assert_int_equal(n, 125137);
	assert_int_equal(c[0], 38);
	assert_int_equal(c[100], 31);
	assert_true(fabs(gen_top_share(c, n, 786432, 10, 1) - 0.3186) < 0.00005);
	free(c);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The two most drawn values of 20000 draws (most drawn first). */
static void top_two(struct gen_dist *d, uint64_t out[2])
{
	enum { N = 20000 };
	static uint64_t v[N];
	uint64_t best[2] = { 0, 0 };

	for (int i = 0; i < N; i++)
		v[i] = gen_dist_next(d);
	qsort(v, N, sizeof(v[0]), cmp_u64);
	for (int i = 0, j; i < N; i = j) {
		for (j = i; j < N && v[j] == v[i]; j++)
			;
		uint64_t c = (uint64_t)(j - i);
		if (c > best[0]) {
			best[1] = best[0];
			out[1] = out[0];
			best[0] = c;
			out[0] = v[i];
		} else if (c > best[1]) {
			best[1] = c;
			out[1] = v[i];
		}
	}
}

/*
 * fio scatters ranks: rank r lands on (r * 0x61c8864680b583eb + rand_off)
 * mod n.  Without the hash (and with the offset at 0) the two hottest
 * blocks are 0 and 1.
 */
static void test_zipf_hash_scatters_hot_blocks(void **state)
{
	const uint64_t nr = 1000003;
	struct gen_dist d;
	uint64_t top[2] = { 0, 0 };

	(void)state;
	assert_int_equal(gen_dist_init(&d, GEN_DIST_ZIPF, 1.1, nr, 7), 0);
	d.disable_hash = true;
	gen_dist_set_center(&d, 0.0);
	top_two(&d, top);
	assert_int_equal(top[0], 0);
	assert_int_equal(top[1], 1);

	assert_int_equal(gen_dist_init(&d, GEN_DIST_ZIPF, 1.1, nr, 7), 0);
	top_two(&d, top);
	assert_int_equal(top[0], d.rand_off % nr);
	assert_int_equal(top[1], (0x61c8864680b583ebull + d.rand_off) % nr);
	assert_true(top[0] > top[1] ? top[0] - top[1] > 1000 : top[1] - top[0] > 1000);
}

static void test_determinism_and_range(void **state)
{
	static const enum gen_dist_type types[] = {
		GEN_DIST_UNIFORM, GEN_DIST_ZIPF, GEN_DIST_PARETO, GEN_DIST_SEQ,
	};
	static const double params[] = { 0, 1.2, 0.3, 0 };

	(void)state;
	for (size_t t = 0; t < 4; t++) {
		struct gen_dist a, b, c;
		int differ = 0;

		assert_int_equal(gen_dist_init(&a, types[t], params[t], 12345, 42), 0);
		assert_int_equal(gen_dist_init(&b, types[t], params[t], 12345, 42), 0);
		assert_int_equal(gen_dist_init(&c, types[t], params[t], 12345, 43), 0);
		for (int i = 0; i < 5000; i++) {
			uint64_t x = gen_dist_next(&a), y = gen_dist_next(&b), z = gen_dist_next(&c);

			assert_int_equal(x, y);
			assert_true(x < 12345 && z < 12345);
			differ += x != z;
		}
		if (types[t] != GEN_DIST_SEQ)
			assert_true(differ > 2500);
	}
}

static void test_uniform_is_flat(void **state)
{
	struct gen_dist d;
	uint64_t bucket[10] = { 0 };

	(void)state;
	assert_int_equal(gen_dist_init(&d, GEN_DIST_UNIFORM, 0, 1000, 9), 0);
	for (int i = 0; i < 100000; i++)
		bucket[gen_dist_next(&d) / 100]++;
	for (int i = 0; i < 10; i++)
		assert_true(bucket[i] > 9500 && bucket[i] < 10500);
}

static void test_parse_dist_and_rw(void **state)
{
	enum gen_dist_type t;
	double p;
	uint32_t w;

	(void)state;
	assert_int_equal(gen_dist_parse("zipf:1.1", &t, &p), 0);
	assert_int_equal(t, GEN_DIST_ZIPF);
	assert_true(p == 1.1);
	assert_int_equal(gen_dist_parse("pareto:0.9", &t, &p), 0);
	assert_int_equal(t, GEN_DIST_PARETO);
	assert_int_equal(gen_dist_parse("uniform", &t, &p), 0);
	assert_int_equal(t, GEN_DIST_UNIFORM);
	assert_int_equal(gen_dist_parse("random", &t, &p), 0);
	assert_int_equal(gen_dist_parse("zipf:1.0", &t, &p), -EINVAL);
	assert_int_equal(gen_dist_parse("zipf", &t, &p), -EINVAL);
	assert_int_equal(gen_dist_parse("zipf:x", &t, &p), -EINVAL);
	assert_int_equal(gen_dist_parse("pareto:1.5", &t, &p), -EINVAL);
	assert_int_equal(gen_dist_parse("gauss:3", &t, &p), -EINVAL);
	assert_int_equal(gen_dist_parse("uniform:3", &t, &p), -EINVAL);

	assert_int_equal(gen_parse_rw("write", &w), 0);
	assert_int_equal(w, 100);
	assert_int_equal(gen_parse_rw("randread", &w), 0);
	assert_int_equal(w, 0);
	assert_int_equal(gen_parse_rw("randrw:70", &w), 0);
	assert_int_equal(w, 70);
	assert_int_equal(gen_parse_rw("randrw:101", &w), -EINVAL);
	assert_int_equal(gen_parse_rw("randrw", &w), -EINVAL);
	assert_int_equal(gen_parse_rw("trim", &w), -EINVAL);
}

static void test_workload_mix_and_alignment(void **state)
{
	struct gen_workload_opts o = {
		.type = GEN_DIST_ZIPF, .param = 1.1, .write_pct = 70,
		.bs = 4096, .size = 64ull << 20, .seed = 5,
	};
	struct gen_workload w;
	int writes = 0;

	(void)state;
	assert_int_equal(gen_workload_init(&w, &o), 0);
	for (int i = 0; i < 100000; i++) {
		struct gen_req r;

		gen_workload_next(&w, &r);
		assert_int_equal(r.off % 4096, 0);
		assert_true(r.off + r.len <= o.size);
		assert_int_equal(r.len, 4096);
		writes += r.is_write;
	}
	assert_true(writes > 69000 && writes < 71000);
	o.size = 100;
	assert_int_equal(gen_workload_init(&w, &o), -EINVAL);
}

static void test_patterns(void **state)
{
	struct gen_workload_opts o = {
		.type = GEN_DIST_ZIPF, .param = 1.1, .write_pct = 30, .bs = 4096,
		.size = 1000 * 4096, .seed = 5, .period = 100, .scan_len = 20, .hot_pct = 10,
	};
	struct gen_workload w, w2;
	struct gen_req r, r2;
	uint64_t hot = 0, scan = 0, last_scan = 0, log_w = 0, seen_part[20] = { 0 };
	enum gen_pattern pat;

	(void)state;
	assert_int_equal(gen_parse_pattern("hotscan", &pat), 0);
	assert_int_equal(pat, GEN_PAT_HOTSCAN);
	assert_int_equal(gen_parse_pattern("loops", &pat), -EINVAL);
	/* hotscan: 80 of every 100 in the hot tenth, then 20 sequential reads walking on */
	o.pattern = GEN_PAT_HOTSCAN;
	assert_int_equal(gen_workload_init(&w, &o), 0);
	for (int i = 0; i < 1000; i++) {
		gen_workload_next(&w, &r);
		if (i % 100 >= 80) {
			assert_false(r.is_write);
			assert_int_equal(r.off, scan * 4096);
			scan++;
		} else {
			assert_true(r.off < 100 * 4096);
			hot++;
		}
	}
	assert_int_equal(hot, 800);
	gen_workload_free(&w);
	/* log: every other request a write appended past the hot part, never repeated */
	o.pattern = GEN_PAT_LOG;
	assert_int_equal(gen_workload_init(&w, &o), 0);
	for (int i = 0; i < 800; i++) {
		gen_workload_next(&w, &r);
		if (i % 2) {
			assert_true(r.is_write);
			assert_int_equal(r.off, (100 + log_w++) * 4096);
		} else {
			assert_true(r.off < 100 * 4096);
		}
	}
	gen_workload_free(&w);
	/* vms: 20 images of 50 blocks, each request inside one, all of them used */
	o.pattern = GEN_PAT_VMS;
	o.parts = 20;
	assert_int_equal(gen_workload_init(&w, &o), 0);
	for (int i = 0; i < 4000; i++) {
		gen_workload_next(&w, &r);
		assert_true(r.off < 1000 * 4096);
		seen_part[r.off / 4096 / 50]++;
	}
	for (int i = 0; i < 20; i++)
		assert_true(seen_part[i] > 100 && seen_part[i] < 300);
	gen_workload_free(&w);
	/* shift: the hot spot moves every period; the same seed gives the same stream */
	o.pattern = GEN_PAT_SHIFT;
	assert_int_equal(gen_workload_init(&w, &o), 0);
	assert_int_equal(gen_workload_init(&w2, &o), 0);
	for (int i = 0; i < 300; i++) {
		gen_workload_next(&w, &r);
		gen_workload_next(&w2, &r2);
		assert_int_equal(r.off, r2.off);
		assert_int_equal(r.is_write, r2.is_write);
		if (i == 99)
			last_scan = w.dist.rand_off;
	}
	assert_true(w.dist.rand_off != last_scan);
	gen_workload_free(&w);
	gen_workload_free(&w2);
	/* loop: 10 positions 100 blocks apart, one block further each pass */
	o.pattern = GEN_PAT_LOOP;
	o.period = 10;
	assert_int_equal(gen_workload_init(&w, &o), 0);
	for (int i = 0; i < 35; i++) {
		gen_workload_next(&w, &r);
		assert_int_equal(r.off, (uint64_t)((i % 10) * 100 + i / 10) * 4096);
	}
	gen_workload_free(&w);
	o.period = 1001;
	assert_int_equal(gen_workload_init(&w, &o), -EINVAL);
	/* the log needs room past the hot part; parts must fit */
	o.pattern = GEN_PAT_VMS;
	o.parts = GEN_MAX_PARTS + 1;
	assert_int_equal(gen_workload_init(&w, &o), -EINVAL);
}

/* ---- traces ---- */

static int parse(const char *s, struct trace *t, char *err)
{
	return trace_parse_buf(s, strlen(s), t, err, 128);
}

static void test_trace_csv(void **state)
{
	const char *s =
		"time_us,op,offset,length\n"
		"# comment\n"
		"0,W,0,4096\n"
		"\n"
		"10, read ,8192,512\r\n"
		"10,T,4096,4096\n"
		"25,f,0,0\n"
		"30,WRITE,1048576,65536";
	struct trace t;
	char err[128];

	(void)state;
	assert_int_equal(parse(s, &t, err), 0);
	assert_int_equal(t.format, TRACE_FMT_CSV);
	assert_int_equal(t.n, 5);
	assert_int_equal(t.recs[0].op, TRACE_OP_WRITE);
	assert_int_equal(t.recs[1].op, TRACE_OP_READ);
	assert_int_equal(t.recs[1].off, 8192);
	assert_int_equal(t.recs[1].len, 512);
	assert_int_equal(t.recs[1].time_us, 10);
	assert_int_equal(t.recs[2].op, TRACE_OP_TRIM);
	assert_int_equal(t.recs[3].op, TRACE_OP_FLUSH);
	assert_int_equal(t.recs[4].len, 65536);
	assert_int_equal(t.max_end, 1048576 + 65536);
	trace_free(&t);
}

static void expect_reject(const char *s, const char *msg_prefix)
{
	struct trace t;
	char err[128];

	assert_int_equal(parse(s, &t, err), -EINVAL);
	assert_int_equal(t.n, 0);
	assert_null(t.recs);
	if (strncmp(err, msg_prefix, strlen(msg_prefix)))
		fail_msg("error '%s' does not start with '%s'", err, msg_prefix);
}

static void test_trace_csv_rejects(void **state)
{
	(void)state;
	expect_reject("0,W,0,4096\n1,W,0\n", "line 2: expected 4 fields");
	expect_reject("0,W,0,4096\n1,X,0,4096\n", "line 2: bad op 'X'");
	expect_reject("# c\n0,W,0,4096\n\n1,W,-5,4096\n", "line 4: bad offset");
	expect_reject("0,W,0,4096\n1,W,0,4k\n", "line 2: bad length");
	expect_reject("5,W,0,4096\n4,W,0,4096\n", "line 2: time goes backwards");
	expect_reject("0,R,0,0\n", "line 1: length 0");
	expect_reject("0,W,0,4096,9\n", "line 1: expected 4 fields");
	expect_reject("abc,W,0,4096\n", "line 1: bad time");
}

static void test_trace_msr(void **state)
{
	/* MSR Cambridge (SNIA IOTTA) lines as the published CSVs have them */
	const char *s =
		"128166372003061629,wdev,0,Read,8192,4096,2106\n"
		"128166372003071629,wdev,0,Write,1048576,65536,1500\r\n"
		"128166372013061629,wdev,1,read,0,512,100\n";
	struct trace t;
	char err[128];

	(void)state;
	assert_int_equal(parse(s, &t, err), 0);
	assert_int_equal(t.format, TRACE_FMT_MSR);
	assert_string_equal(trace_format_name(t.format), "msr");
	assert_int_equal(t.n, 3);
	assert_int_equal(t.recs[0].op, TRACE_OP_READ);
	assert_int_equal(t.recs[0].time_us, 0);
	assert_int_equal(t.recs[0].off, 8192);
	assert_int_equal(t.recs[0].len, 4096);
	assert_int_equal(t.recs[1].op, TRACE_OP_WRITE);
	assert_int_equal(t.recs[1].time_us, 1000);      /* 10000 ticks of 100 ns */
	assert_int_equal(t.recs[1].len, 65536);
	assert_int_equal(t.recs[2].time_us, 1000000);
	assert_int_equal(t.recs[2].file, 1);            /* disk 1: another file */
	assert_int_equal(t.n_files, 2);
	trace_free(&t);
	expect_reject("128166372003061629,wdev,0,Read,8192,4096,2106\n"
		      "128166372003061630,wdev,0,Read,8192,4096\n", "line 2: expected 7 MSR fields");
	expect_reject("128166372003061629,wdev,0,Read,8192,4096,2106\n"
		      "128166372003061630,wdev,0,Trim,8192,4096,1\n", "line 2: bad type 'Trim'");
	expect_reject("128166372003061629,wdev,0,Read,8192,4096,2106\n"
		      "128166372003061630,wdev,0,Read,x,4096,1\n", "line 2: bad offset");
	expect_reject("128166372003061629,wdev,0,Read,8192,4096,2106\n"
		      "128166372003061628,wdev,0,Read,0,4096,1\n", "line 2: timestamp before");
}

static void test_trace_blkparse(void **state)
{
	/* blkparse's default output: Q G D of one write, a read queued and completed,
	 * a message, an empty preflush, a discard, then the summary */
	const char *s =
		"  8,0    3        1     0.000000000  697  Q   W 223490 + 8 [kjournald]\n"
		"  8,0    3        2     0.000001000  697  G   W 223490 + 8 [kjournald]\n"
		"  8,0    3        3     0.000010000  697  D   W 223490 + 8 [kjournald]\n"
		"  8,0    0        4     0.001000000  100  Q   R 1000 + 16 [fio]\n"
		"  8,0    0        0     0.001500000    0  m   N cfq697 insert_request\n"
		"  8,0    0        5     0.002000000  100  Q  FWS 0 + 0 [jbd2]\n"
		"  8,16   0        6     3.000000001  100  Q   D 2048 + 2048 [fstrim]\n"
		"  8,0    0        7     3.004000000  100  C   R 1000 + 16 [0]\n"
		"CPU0 (8,0):\n"
		" Reads Queued:           1,        8KiB\t Writes Queued:           2,        4KiB\n";
	struct trace t;
	char err[128];

	(void)state;
	assert_int_equal(parse(s, &t, err), 0);
	assert_int_equal(t.format, TRACE_FMT_BLKPARSE);
	assert_int_equal(t.n, 4);   /* the Q events only */
	assert_int_equal(t.recs[0].op, TRACE_OP_WRITE);
	assert_int_equal(t.recs[0].off, 223490ull * 512);
	assert_int_equal(t.recs[0].len, 4096);
	assert_int_equal(t.recs[1].op, TRACE_OP_READ);
	assert_int_equal(t.recs[1].time_us, 1000);
	assert_int_equal(t.recs[1].len, 8192);
	assert_int_equal(t.recs[2].op, TRACE_OP_FLUSH);
	assert_int_equal(t.recs[3].op, TRACE_OP_TRIM);
	assert_int_equal(t.recs[3].time_us, 3000000);
	assert_int_equal(t.recs[3].len, 2048 * 512);
	assert_int_equal(t.recs[3].file, 1);            /* device 8,16 */
	trace_free(&t);
	/* only D events (a trace filtered with -a issue): those are replayed */
	assert_int_equal(parse("  8,0 1 1 0.5 9 D WS 8 + 8 [x]\n  8,0 1 2 0.6 9 D R 64 + 8 [x]\n",
			       &t, err), 0);
	assert_int_equal(t.n, 2);
	assert_int_equal(t.recs[0].time_us, 500000);
	trace_free(&t);
	expect_reject("  8,0 1 1 0.5 9 Q W 8 + 8 [x]\n  garbage line here\n",
		      "line 2: not a blkparse event line");
	expect_reject("  8,0 1 1 0.5 9 Q W 8 + 8 [x]\n  8,0 1 2 0.6 9 Q W 8 + x [x]\n",
		      "line 2: bad 'SECTOR + COUNT'");
	expect_reject("  8,0 1 1 0.5 9 Q W 8 + 0 [x]\n", "line 1: W of 0 sectors");
	expect_reject("  8,0 1 1 0.5 9 G W 8 + 8 [x]\n", "line 1: no Q, D or C events");
}

static void test_trace_iolog_v2(void **state)
{
	const char *s =
		"fio version 2 iolog\n"
		"/dev/nbd0 add\n"
		"/dev/nbd0 open\n"
		"/dev/nbd0 write 0 4096\n"
		"/dev/nbd0 wait 1500 0\n"
		"/dev/nbd0 read 4096 8192\n"
		"/dev/nbd0 sync 0 0\n"
		"/dev/nbd0 trim 8192 4096\n"
		"/dev/nbd0 close\n";
	struct trace t;
	char err[128];

	(void)state;
	assert_int_equal(parse(s, &t, err), 0);
	assert_int_equal(t.format, TRACE_FMT_IOLOG2);
	assert_int_equal(t.n_files, 1);
	assert_int_equal(t.n, 4);
	assert_int_equal(t.recs[0].op, TRACE_OP_WRITE);
	assert_int_equal(t.recs[0].time_us, 0);
	assert_int_equal(t.recs[1].op, TRACE_OP_READ);
	assert_int_equal(t.recs[1].time_us, 1500);
	assert_int_equal(t.recs[1].len, 8192);
	assert_int_equal(t.recs[2].op, TRACE_OP_FLUSH);
	assert_int_equal(t.recs[3].op, TRACE_OP_TRIM);
	trace_free(&t);

	expect_reject("fio version 2 iolog\nf add\nf write 0\n", "line 3: expected");
	expect_reject("fio version 2 iolog\nf add\nf frob 0 4096\n", "line 3: bad action");
	expect_reject("fio version 2 iolog\ng write 0 4096\n", "line 2: file 'g' used before");
	expect_reject("fio version 2 iolog\nf add\nf delete\n", "line 3: bad file action");
	expect_reject("fio version 1 iolog\n", "line 1: unsupported");
}

/* The shape `fio --write_iolog` (3.33) writes: v3, microsecond stamps. */
static void test_trace_iolog_v3(void **state)
{
	const char *s =
		"fio version 3 iolog\n"
		"27 f add\n"
		"217 f open\n"
		"222 f write 61440 4096\n"
		"10148 f write 774144 4096\n"
		"10150 f wait 99999 0\n"
		"20166 f read 880640 4096\n"
		"30282 f close\n";
	struct trace t;
	char err[128];

	(void)state;
	assert_int_equal(parse(s, &t, err), 0);
	assert_int_equal(t.format, TRACE_FMT_IOLOG3);
	assert_int_equal(t.n, 3);
	assert_int_equal(t.recs[0].time_us, 222);
	assert_int_equal(t.recs[1].time_us, 10148);
	assert_int_equal(t.recs[2].time_us, 20166);   /* wait ignored in v3 */
	assert_int_equal(t.recs[2].op, TRACE_OP_READ);
	trace_free(&t);

	expect_reject("fio version 3 iolog\n1 f add\nx f write 0 4096\n", "line 3: bad timestamp");
	expect_reject("fio version 3 iolog\n1 f add\n9 f write 0 4096\n5 f write 0 4096\n",
		      "line 4: time goes backwards");
	expect_reject("fio version 3 iolog\n1 f add\n2 f write 0 4096 7\n", "line 3: expected");
}

/* ---- OPT ---- */

static void test_opt_textbook(void **state)
{
	/* Silberschatz's reference string: OPT with 3 frames has 9 faults. */
	static const uint64_t s[] = { 7, 0, 1, 2, 0, 3, 0, 4, 2, 3, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1 };
	struct opt_result r;

	(void)state;
	assert_int_equal(opt_simulate(s, 20, 3, false, 0, &r), 0);
	assert_int_equal(r.misses, 9);
	assert_int_equal(r.compulsory, 6);   /* 7 0 1 2 3 4 */
	assert_int_equal(r.accesses, 20);
	assert_true(fabs(r.miss_ratio - 0.45) < 1e-12);
}

static void test_opt_bypass_by_hand(void **state)
{
	/* A B C A B D A B, 2 slots.
	 * demand: A- B- C-(evict B) A+ B-(evict C) D-(evict B) A+ B-  -> 6 misses
	 * bypass: A- B- C-(not kept) A+ B+ D-(not kept) A+ B+         -> 4 misses */
	static const uint64_t s[] = { 1, 2, 3, 1, 2, 4, 1, 2 };
	struct opt_result r;

	(void)state;
	assert_int_equal(opt_simulate(s, 8, 2, false, 0, &r), 0);
	assert_int_equal(r.misses, 6);
	assert_int_equal(opt_simulate(s, 8, 2, true, 0, &r), 0);
	assert_int_equal(r.misses, 4);
	assert_int_equal(opt_simulate(s, 8, 0, true, 0, &r), 0);
	assert_int_equal(r.misses, 8);
	assert_int_equal(opt_simulate(s, 8, 4, false, 0, &r), 0);
	assert_int_equal(r.misses, 4);   /* only compulsory */
	assert_int_equal(opt_simulate(s, 0, 4, false, 0, &r), 0);
	assert_int_equal(r.misses, 0);
	/* warm-up of 3 (A B C): counted A+ B-(evict C) D-(evict B) A+ B- under demand */
	assert_int_equal(opt_simulate(s, 8, 2, false, 3, &r), 0);
	assert_int_equal(r.accesses, 5);
	assert_int_equal(r.misses, 3);
	assert_int_equal(r.compulsory, 1);   /* D */
}

/* OPT never loses to LRU on the same sequence, and bypass never loses to demand. */
static void test_opt_beats_lru(void **state)
{
	enum { N = 4000, CAP = 16 };
	uint64_t s[N], lru[CAP];
	struct gen_dist d;

	(void)state;
	assert_int_equal(gen_dist_init(&d, GEN_DIST_ZIPF, 0.8, 200, 3), 0);
	for (int i = 0; i < N; i++)
		s[i] = gen_dist_next(&d) * 1000003ull;   /* sparse ids */
	size_t used = 0;
	uint64_t lru_miss = 0;
	for (int i = 0; i < N; i++) {
		size_t j;

		for (j = 0; j < used && lru[j] != s[i]; j++)
			;
		if (j == used) {
			lru_miss++;
			if (used < CAP)
				used++;
			j = used - 1;
		}
		memmove(&lru[1], &lru[0], j * sizeof(lru[0]));
		lru[0] = s[i];
	}
	struct opt_result dem, byp;
	assert_int_equal(opt_simulate(s, N, CAP, false, 0, &dem), 0);
	assert_int_equal(opt_simulate(s, N, CAP, true, 0, &byp), 0);
	assert_true(dem.misses < lru_miss);
	assert_true(byp.misses <= dem.misses);
	assert_true(byp.misses >= byp.compulsory);
	/* tier-sim's LRU reference gives exactly the naive list's count */
	struct opt_result l;
	assert_int_equal(lru_simulate(s, NULL, N, CAP, 0, &l), 0);
	assert_int_equal(l.misses, lru_miss);
	assert_int_equal(l.accesses, N);
	assert_int_equal(l.bytes, N);
	assert_int_equal(l.miss_bytes, lru_miss);
}

static void test_lru_by_hand_with_weights(void **state)
{
	/* 1 2 3 1 4 1 2, 2 slots: 1- 2- 3-(1 out) 1-(2 out) 4-(3 out) 1+ 2-(4 out) */
	static const uint64_t s[] = { 1, 2, 3, 1, 4, 1, 2 };
	static const uint32_t w[] = { 10, 20, 30, 40, 50, 60, 70 };
	struct opt_result r;

	(void)state;
	assert_int_equal(lru_simulate(s, w, 7, 2, 0, &r), 0);
	assert_int_equal(r.misses, 6);
	assert_int_equal(r.compulsory, 4);
	assert_int_equal(r.bytes, 280);
	assert_int_equal(r.miss_bytes, 220);   /* all but the hit's 60 */
	assert_int_equal(lru_simulate(s, w, 7, 0, 0, &r), 0);
	assert_int_equal(r.misses, 7);
	assert_int_equal(lru_simulate(s, w, 7, 2, 4, &r), 0);   /* warm-up 1 2 3 1 */
	assert_int_equal(r.accesses, 3);
	assert_int_equal(r.misses, 2);
	assert_int_equal(r.compulsory, 1);   /* 4 */
	assert_int_equal(r.miss_bytes, 120);
	/* OPT's byte count on the same: 1- 2- 3-(bypass) 1+ 4-(bypass) 1+ 2+ */
	assert_int_equal(opt_simulate_w(s, w, 7, 2, true, 0, &r), 0);
	assert_int_equal(r.misses, 4);
	assert_int_equal(r.miss_bytes, 110);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zipf_matches_fio_genzipf),
		cmocka_unit_test(test_zipf_seed004_shape),
		cmocka_unit_test(test_pareto_matches_fio_genzipf),
		cmocka_unit_test(test_zipf_hash_scatters_hot_blocks),
		cmocka_unit_test(test_determinism_and_range),
		cmocka_unit_test(test_uniform_is_flat),
		cmocka_unit_test(test_parse_dist_and_rw),
		cmocka_unit_test(test_workload_mix_and_alignment),
		cmocka_unit_test(test_trace_csv),
		cmocka_unit_test(test_trace_csv_rejects),
		cmocka_unit_test(test_patterns),
		cmocka_unit_test(test_trace_msr),
		cmocka_unit_test(test_trace_blkparse),
		cmocka_unit_test(test_trace_iolog_v2),
		cmocka_unit_test(test_trace_iolog_v3),
		cmocka_unit_test(test_opt_textbook),
		cmocka_unit_test(test_opt_bypass_by_hand),
		cmocka_unit_test(test_opt_beats_lru),
		cmocka_unit_test(test_lru_by_hand_with_weights),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
