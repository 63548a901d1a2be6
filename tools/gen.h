/* SPDX-License-Identifier: MIT */
/*
 * tools/gen.h - workload generators compatible with fio's random
 * distributions (random_distribution=zipf:T | pareto:H | random), shared by
 * tier-sim and tier-bench.
 *
 * What is exact and what is not:
 *  - gen_taus88 is fio's 32-bit Tausworthe generator (lib/rand.c) including
 *    its seeding quirk; the same seed gives the same stream.
 *  - gen_dist_next() for zipf and pareto follows fio's lib/zipf.c step by
 *    step: the same zeta(n) (capped at 10M terms), the same inverse-CDF
 *    approximation, the same rank hashing (rank * 0x61c8864680b583eb, fio
 *    3.x's __hash_u64; fio 2.x multiplied by 0x9e37fffffffc0001, which
 *    scatters ranks the same way) and the same random offset added before
 *    the modulo.  With the seed fio used, the sequence of block indexes is
 *    identical: test_gen checks hit counts against fio-genzipf 3.33.  fio derives that seed from the file name, the
 *    job number and its randseed; we take the seed as a parameter.
 *  - Block index -> offset is fio's io_u.c rule: offset = index * bs.  fio
 *    uses nranges = ceil(size / bs); we use floor, so that every request
 *    lies inside the target (identical when bs divides size).
 *  - uniform is fio's tausworthe formula (index = n * r / 2^32) but with
 *    norandommap semantics: fio's default random map (each block once per
 *    pass) is not reproduced.  read/write mix uses fio's rwmix rule
 *    (a draw in 1..100 <= read% is a read) on its own stream.
 */
#ifndef TIER_TOOLS_GEN_H
#define TIER_TOOLS_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gen_taus88 {
	uint32_t s1, s2, s3;
};

void gen_taus88_seed(struct gen_taus88 *t, uint32_t seed);
uint32_t gen_taus88_next(struct gen_taus88 *t);

enum gen_dist_type {
	GEN_DIST_UNIFORM = 0,
	GEN_DIST_ZIPF,
	GEN_DIST_PARETO,
	GEN_DIST_SEQ,       /* sequential, wrapping: not a fio random_distribution */
};

struct gen_dist {
	enum gen_dist_type type;
	uint64_t nranges;
	double param;        /* zipf theta, pareto h */
	double zeta2, zetan, pareto_pow;
	struct gen_taus88 rand;
	uint64_t rand_off;
	bool disable_hash;   /* fio's zipf_disable_hash(): ranks not scattered */
	uint64_t seq_next;
};

/*
 * "zipf:1.1", "pareto:0.9", "uniform" (or "random"), "seq".
 * -EINVAL for anything else, zipf theta == 1.0 or <= 0, pareto h outside (0,1).
 */
int gen_dist_parse(const char *s, enum gen_dist_type *type, double *param);
/* -EINVAL for nranges == 0 or a bad param.  The offset is fio's default (random). */
int gen_dist_init(struct gen_dist *d, enum gen_dist_type type, double param,
		  uint64_t nranges, uint32_t seed);
/* fio's random_center: rand_off = nranges * center, center in [0, 1]. */
void gen_dist_set_center(struct gen_dist *d, double center);
/* Next block index in [0, nranges). */
uint64_t gen_dist_next(struct gen_dist *d);

/*
 * fio-genzipf's analysis: draw nsamples indexes, count hits per distinct
 * index, sort the counts descending into *counts (malloc'd, *ncounts
 * entries).  Returns 0 or -ENOMEM.
 */
int gen_hit_counts(struct gen_dist *d, uint64_t nsamples, uint64_t **counts,
		   size_t *ncounts);
/*
 * Share (0..1) of all hits that the top `fraction` of the distinct blocks
 * take, bucketed as fio-genzipf does (ceil-sized buckets of the sorted list).
 */
double gen_top_share(const uint64_t *counts, size_t ncounts, uint64_t total,
		     unsigned buckets, unsigned upto_bucket);

/* ---- request streams ---- */

/*
 * Patterns over the distribution (tier-sim's workload suite; deterministic
 * for a seed, like everything here):
 *  plain    - the distribution over the whole target (fio's randrw);
 *  hotscan  - the distribution over the first hot_pct % of the target, and
 *             every period requests a sequential scan of scan_len blocks
 *             that walks on through the whole target (a backup, a find);
 *  shift    - the distribution over the whole target with its hot spot
 *             (fio's random_center) moved to a new place every period
 *             requests: phase changes;
 *  log      - every other request a write appended to a log that fills the
 *             part of the target past hot_pct % (written once, never read,
 *             wrapping), the rest the distribution over the hot part;
 *  loop     - a cyclic loop over period positions spread evenly over the
 *             target (position p is block p x (blocks / period), pass k adds
 *             k blocks, modulo the stride): every object in turn, a new block
 *             of it each pass; the distribution is not used;
 *  vms      - parts equal images side by side (seed 004's 20 VMs), each
 *             with its own distribution of the same shape and seed + part;
 *             each request picks an image uniformly.
 */
enum gen_pattern {
	GEN_PAT_PLAIN = 0, GEN_PAT_HOTSCAN, GEN_PAT_SHIFT, GEN_PAT_LOG, GEN_PAT_VMS, GEN_PAT_LOOP,
};
#define GEN_MAX_PARTS 64

struct gen_workload_opts {
	enum gen_dist_type type;
	double param;
	uint32_t write_pct;  /* 0..100 */
	uint64_t bs;         /* bytes per request, > 0 */
	uint64_t size;       /* bytes of the target, >= bs */
	uint32_t seed;
	enum gen_pattern pattern;
	uint32_t hot_pct;    /* hotscan, log: 1..99 (0 = 10) */
	uint64_t period;     /* hotscan, shift: requests (0 = 50000); loop: positions */
	uint64_t scan_len;   /* hotscan: blocks per scan (0 = period / 5) */
	uint32_t parts;      /* vms: 1..GEN_MAX_PARTS (0 = 20) */
};

struct gen_workload {
	struct gen_workload_opts o;
	struct gen_dist dist;
	struct gen_taus88 rw;
	struct gen_taus88 pick;          /* vms: which image */
	struct gen_dist *parts;          /* vms: one distribution per image */
	uint64_t n, hot_blocks, part_blocks, scan_pos, log_pos, phase;
};

/* "plain", "hotscan", "shift", "log", "vms", "loop" -> pattern; -EINVAL otherwise. */
int gen_parse_pattern(const char *s, enum gen_pattern *out);
void gen_workload_free(struct gen_workload *w);

struct gen_req {
	bool is_write;
	uint64_t off, len;
};

/* "read"/"randread" (0), "write"/"randwrite" (100), "randrw:W" or "rw:W" (W = write %). */
int gen_parse_rw(const char *s, uint32_t *write_pct);
int gen_workload_init(struct gen_workload *w, const struct gen_workload_opts *o);
void gen_workload_next(struct gen_workload *w, struct gen_req *out);

#endif
