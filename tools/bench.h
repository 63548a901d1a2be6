/* SPDX-License-Identifier: MIT */
/*
 * tools/bench.h - tier-bench's load engine, shared by its two front ends:
 * `tier-bench --uri ...` (one export, tier-bench.c) and `tier-bench scenario`
 * (one export per job, tierd started per variant, scenario.c).  A bench is a
 * set of jobs, one NBD handle each, every job a closed loop at the same queue
 * depth with its own request source; a run drives all of them at once and
 * sums them into one struct run (aggregate IOPS, latency over every request
 * of every job, tierd's counter deltas around the run).
 */
#ifndef TIER_TOOLS_BENCH_H
#define TIER_TOOLS_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gen.h"

#define MAX_QDS 16
#define MAX_QD  1024

/* tierd counters read from `perf dump`: X(name) */
#define BENCH_COUNTERS(X)                                                  \
	X(read_ops) X(write_ops) X(read_bytes) X(write_bytes) X(errors)    \
	X(read_hits) X(read_misses) X(write_hits) X(write_misses)          \
	X(proxy_reads) X(proxy_writes) X(proxy_write_bytes)                \
	X(promotions) X(promote_bytes) X(promote_throttled)                \
	X(fills) X(fill_bytes)                                             \
	X(flushes) X(flush_bytes) X(evictions) X(evict_bytes)              \
	X(cached_bytes) X(dirty_bytes)

enum ctr_id {
#define CTR_ENUM(n) CTR_##n,
	BENCH_COUNTERS(CTR_ENUM)
#undef CTR_ENUM
	CTR_BASE_IO, CTR_CACHE_IO, CTR_MAX
};

extern const char *const ctr_names[CTR_MAX];

struct counters {
	bool ok, pools;     /* pools: tierd reported per-pool store stats */
	double v[CTR_MAX];
};

struct cfg {
	const char *uri, *admin, *trace_path, *csv, *json, *label, *dist_s, *rw_s;
	unsigned qds[MAX_QDS];
	size_t nqd;
	double runtime, ramp;
	uint64_t ops, bs, size;
	enum gen_dist_type dist;
	double dist_param;
	uint32_t write_pct, seed;
	/* --pattern and its knobs, as tier-sim's (tools/gen.h; 0 = its default) */
	enum gen_pattern pattern;
	const char *pattern_s;
	uint32_t hot_pct, parts;
	uint64_t period, scan_len;
	bool verify;
	int server_pid;     /* > 0: also measure that process's CPU time per run (/proc) */
};

/* One run at one queue depth, summed over the jobs. Plain data (no pointers). */
struct run {
	unsigned qd, njobs;
	uint64_t ops, rd_ops, wr_ops, other_ops, bytes, io_errors;
	uint64_t verified, verify_errors;
	uint64_t job_ops_min, job_ops_max;                   /* counted requests per job */
	double secs, lat_mean, lat_p50, lat_p99, lat_max;    /* microseconds */
	/* the whole run (ramp, counted part, drain): wall and CPU seconds of this
	 * process and of cfg.server_pid (-1 = not measured) */
	double wall_s, cpu_s, server_cpu_s;
	struct counters c0, c1;
};

struct bench;

/*
 * Connect one job per URI (job i's generator seeded with c->seed + i) and
 * prepare its request source.  c->size 0 = each job uses its whole export
 * (and c->size becomes the first export's size).  Dies on any error.
 */
struct bench *bench_open(struct cfg *c, const char *const *uris, size_t nuris);
/* One closed-loop run of every job at queue depth qd (1..MAX_QD). */
void bench_run_qd(struct bench *b, unsigned qd, struct run *r);
void bench_close(struct bench *b);

/* ---- results ---- */
enum col { C_IOPS, C_MBS, C_MEAN, C_P50, C_P99, C_MAX, C_PROMO, C_PROXW, C_PROXR,
	   C_FLUSH, C_EVICT, C_HIT, C_PROMO_B, C_BASE_B, C_CACHE_B, C_NCOL };

struct col_desc {
	const char *row, *csv;
	bool tierd;         /* from tierd's counters (needs the admin socket) */
	int prec;
};

extern const struct col_desc cols[C_NCOL];

double col_value(const struct run *r, enum col k);
double run_delta(const struct run *r, enum ctr_id i);
double ratio(double a, double b);
void print_num(FILE *f, double v, int prec, bool json);
void json_run_columns(FILE *f, const struct run *r);
void json_str(FILE *f, const char *s);
FILE *open_out(const char *path);
void close_out(FILE *f, const char *path);

/* ---- shared helpers ---- */
uint64_t now_ns(void);
double self_cpu_s(void);               /* user + system seconds of this process */
double proc_cpu_s(int pid);            /* the same for another process, -1 if unknown */
uint64_t parse_size(const char *opt, const char *v);
double parse_num(const char *opt, const char *v, double lo, double hi);
void parse_qds(struct cfg *c, const char *v);

/*
 * Print "tier-bench: MESSAGE" and exit(2).  When die_hook is set it is
 * called with the message first (scenario's load process hands the reason
 * to its parent that way).
 */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
extern void (*die_hook)(const char *msg);

/* `tier-bench scenario NAME [options]` (scenario.c); returns the exit status. */
int scenario_main(int argc, char **argv);

#endif
