/* SPDX-License-Identifier: MIT */
/*
 * tier-bench - replay a workload against a running tierd over NBD with
 * libnbd's async API: a closed loop (like fio's iodepth) at each queue depth
 * of --qd, fed by the fio-compatible generators of gen.c or by a trace, with
 * client-side latency and, around each run, the deltas of tierd's counters
 * read from its admin socket (`perf dump`).  It decides what to submit next
 * and what to report; it must never touch tierd other than through NBD and
 * the admin socket, and never report a run in which an I/O failed or a
 * verified read returned wrong data as a success.
 *
 * The engine (bench_open / bench_run_qd) drives one job per export, all at
 * the same time: `tier-bench --uri` is one job, `tier-bench scenario`
 * (scenario.c) one per image.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <libnbd.h>

#include "bench.h"
#include "gen.h"
#include "trace.h"

#define VERIFY_MAGIC 0x48434e4542524954ull   /* "TIERBENCH"-ish, little-endian */

const char *const ctr_names[CTR_MAX] = {
#define CTR_NAME(n) #n,
	BENCH_COUNTERS(CTR_NAME)
#undef CTR_NAME
	"base_io_bytes", "cache_io_bytes",
};

struct req {
	enum trace_op op;
	uint64_t off, len;
};

struct job;

struct slot {
	struct job *j;
	struct req r;
	uint64_t t0;
	unsigned char *buf;
	int err;
	bool busy, pending;         /* pending: generated, waiting on an overlap */
};

/* One export: its connection, request source and slots. */
struct job {
	struct bench *b;
	const char *uri;
	struct nbd_handle *h;
	struct gen_workload wl;
	size_t tr_next;
	uint64_t size, seq, run_id;
	uint64_t ops;                /* counted requests in the current run */
	struct slot *slots;          /* MAX_QD */
	uint32_t *expect;            /* --verify: last written seq per block, 0 = unknown */
	unsigned char *busy_blk;     /* --verify: requests in flight per block */
};

struct bench {
	const struct cfg *c;
	struct job *jobs;
	size_t njobs;
	struct trace tr;
	uint64_t max_len;
	struct slot **done;          /* njobs * MAX_QD */
	size_t ndone;
	struct pollfd *pfd;          /* njobs */
	unsigned inflight;
	uint64_t *lat;
	size_t nlat, caplat;
	bool counting;
};

void (*die_hook)(const char *msg);

void die(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "tier-bench: %s\n", msg);
	if (die_hook)
		die_hook(msg);
	exit(2);
}

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double self_cpu_s(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return -1;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

double proc_cpu_s(int pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	long tck = sysconf(_SC_CLK_TCK);
	FILE *f;
	size_t n;

	if (pid <= 0 || tck <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');     /* the name may hold spaces and parentheses */
	/* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			 &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)tck;
}

/* ---- admin socket: one "perf dump" line out, one JSON line back (jansson) ---- */

static char *admin_ask(const char *path, const char *cmd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 10 };
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int fd = -1;

	if (strlen(path) >= sizeof(sa.sun_path))
		goto out;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    write(fd, cmd, strlen(cmd)) != (ssize_t)strlen(cmd))
		goto fail;
	for (;;) {
		ssize_t n;
		if (len + 4096 + 1 > cap) {
			char *nb = realloc(buf, cap = cap ? cap * 2 : 65536);
			if (!nb)
				goto fail;
			buf = nb;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
		if (memchr(buf + len - (size_t)n, '\n', (size_t)n))
			break;
	}
	if (!buf || !len || !strchr(buf, '\n'))
		goto fail;
	goto out;
fail:
	free(buf);
	buf = NULL;
out:
	if (fd >= 0)
		close(fd);
	return buf;
}

/* Sum of a pool logger's OP_bytes counters (perf dump "tierd-pool-ROLE"). */
static double pool_bytes(json_t *sec)
{
	const char *k;
	json_t *v;
	double sum = 0;

	json_object_foreach(sec, k, v) {
		size_t n = strlen(k);
		if (n > 6 && !strcmp(k + n - 6, "_bytes") && json_is_integer(v))
			sum += (double)json_integer_value(v);
	}
	return sum;
}

static void counters_read(const char *admin, struct counters *c)
{
	json_t *j, *t, *base, *cache;
	json_error_t err;
	char *ans;

	memset(c, 0, sizeof(*c));
	if (!admin)
		return;
	ans = admin_ask(admin, "perf dump\n");
	if (!ans)
		die("admin socket %s: no answer to `perf dump`", admin);
	j = json_loads(ans, JSON_DISABLE_EOF_CHECK, &err);
	t = json_object_get(j, "tierd");
	if (!json_is_object(t))
		die("admin socket %s: `perf dump` answer has no \"tierd\" logger: %.200s", admin, ans);
	for (int i = 0; i < CTR_BASE_IO; i++) {
		json_t *v = json_object_get(t, ctr_names[i]);
		if (!json_is_integer(v))
			die("admin socket: `perf dump` lacks %s", ctr_names[i]);
		c->v[i] = (double)json_integer_value(v);
	}
	base = json_object_get(j, "tierd-pool-base");
	cache = json_object_get(j, "tierd-pool-cache");
	if (base || cache) {
		c->v[CTR_BASE_IO] = pool_bytes(base);
		c->v[CTR_CACHE_IO] = pool_bytes(cache);
		c->pools = true;
	}
	c->ok = true;
	json_decref(j);
	free(ans);
}

double run_delta(const struct run *r, enum ctr_id i)
{
	return r->c1.v[i] - r->c0.v[i];
}

/* ---- data pattern for --verify: header + a stream seeded by (run, block, seq) ---- */

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void pattern_fill(unsigned char *p, uint64_t bs, uint64_t run, uint64_t blk, uint64_t seq)
{
	uint64_t hdr[4] = { VERIFY_MAGIC, blk, seq, run };
	uint64_t x = run ^ (blk * 0x61c8864680b583ebull) ^ (seq << 1), w;

	memcpy(p, hdr, sizeof(hdr));
	for (uint64_t i = sizeof(hdr); i + 8 <= bs; i += 8) {
		w = splitmix(&x);
		memcpy(p + i, &w, 8);
	}
}

/* 0 if the block holds what (run, blk, seq) wrote, else a short reason. */
static const char *pattern_check(const unsigned char *p, uint64_t bs, uint64_t run,
				 uint64_t blk, uint64_t seq, unsigned char *tmp)
{
	uint64_t hdr[4];

	memcpy(hdr, p, sizeof(hdr));
	if (hdr[0] != VERIFY_MAGIC)
		return "no header (block never written, or overwritten by something else)";
	if (hdr[1] != blk)
		return "header names another block (misplaced data)";
	if (hdr[3] != run || hdr[2] != seq)
		return "stale data (an older write's sequence number)";
	pattern_fill(tmp, bs, run, blk, seq);
	return memcmp(p, tmp, bs) ? "header right but payload differs (torn write)" : NULL;
}

/* ---- request sources ---- */

static void next_req(struct job *j, struct req *r)
{
	const struct bench *b = j->b;

	if (b->c->trace_path) {
		const struct trace_rec *t = &b->tr.recs[j->tr_next];
		j->tr_next = (j->tr_next + 1) % b->tr.n;
		r->op = t->op;
		r->off = t->off;
		r->len = t->len;
		return;
	}
	struct gen_req g;
	gen_workload_next(&j->wl, &g);
	r->op = g.is_write ? TRACE_OP_WRITE : TRACE_OP_READ;
	r->off = g.off;
	r->len = g.len;
}

/* --verify: may this request start now?  Blocks overlapping one in flight wait. */
static bool blocks_free(const struct job *j, const struct req *r)
{
	uint64_t bs = j->b->c->bs;

	if (!j->busy_blk || r->op == TRACE_OP_FLUSH)
		return true;
	for (uint64_t k = r->off / bs; k < (r->off + r->len) / bs; k++)
		if (j->busy_blk[k])
			return false;
	return true;
}

static void blocks_mark(struct job *j, const struct req *r, int d)
{
	uint64_t bs = j->b->c->bs;

	if (!j->busy_blk || r->op == TRACE_OP_FLUSH)
		return;
	for (uint64_t k = r->off / bs; k < (r->off + r->len) / bs; k++)
		j->busy_blk[k] = (unsigned char)(j->busy_blk[k] + d);
}

static int on_complete(void *user_data, int *error)
{
	struct slot *s = user_data;
	struct bench *b = s->j->b;

	s->err = *error;
	b->done[b->ndone++] = s;
	return 1;    /* retire the command */
}

static void submit(struct job *j, struct slot *s)
{
	nbd_completion_callback cb = { .callback = on_complete, .user_data = s };
	const struct req *r = &s->r;
	uint64_t bs = j->b->c->bs;
	int64_t rc = 0;

	if (j->expect && r->op == TRACE_OP_WRITE)
		for (uint64_t o = 0; o < r->len; o += bs)
			pattern_fill(s->buf + o, bs, j->run_id, (r->off + o) / bs, ++j->seq);
	blocks_mark(j, r, 1);
	s->busy = true;
	s->pending = false;
	s->err = 0;
	s->t0 = now_ns();
	j->b->inflight++;
	switch (r->op) {
	case TRACE_OP_READ:
		rc = nbd_aio_pread(j->h, s->buf, r->len, r->off, cb, 0);
		break;
	case TRACE_OP_WRITE:
		rc = nbd_aio_pwrite(j->h, s->buf, r->len, r->off, cb, 0);
		break;
	case TRACE_OP_TRIM:
		rc = nbd_aio_trim(j->h, r->len, r->off, cb, 0);
		break;
	case TRACE_OP_FLUSH:
		rc = nbd_aio_flush(j->h, cb, 0);
		break;
	}
	if (rc < 0)
		die("submit: %s", nbd_get_error());
}

/* Take the next request into slot s and start it unless it must wait. */
static void refill(struct job *j, struct slot *s)
{
	next_req(j, &s->r);
	s->pending = true;
	if (blocks_free(j, &s->r))
		submit(j, s);
}

static void verify_done(struct job *j, struct slot *s, struct run *r)
{
	static unsigned char tmp[1 << 20];
	uint64_t bs = j->b->c->bs;

	for (uint64_t o = 0; o < s->r.len; o += bs) {
		uint64_t blk = (s->r.off + o) / bs;
		if (s->r.op == TRACE_OP_WRITE) {
			uint64_t seq;
			memcpy(&seq, s->buf + o + 16, 8);
			j->expect[blk] = s->err ? 0 : (uint32_t)seq;
		} else if (s->r.op == TRACE_OP_TRIM) {
			j->expect[blk] = 0;
		} else if (s->r.op == TRACE_OP_READ && !s->err && j->expect[blk]) {
			const char *why = pattern_check(s->buf + o, bs, j->run_id, blk,
							j->expect[blk], tmp);
			r->verified++;
			if (why && ++r->verify_errors <= 10)
				fprintf(stderr, "tier-bench: verify: %sblock %" PRIu64
					" (offset %" PRIu64 "): %s\n", j->b->njobs > 1 ? j->uri : "",
					blk, blk * bs, why);
		}
	}
}

static void complete(struct slot *s, struct run *r, uint64_t t)
{
	struct job *j = s->j;
	struct bench *b = j->b;

	s->busy = false;
	b->inflight--;
	blocks_mark(j, &s->r, -1);
	if (j->expect)
		verify_done(j, s, r);
	if (s->err && ++r->io_errors <= 10)
		fprintf(stderr, "tier-bench: %s%s%s at %" PRIu64 "+%" PRIu64 ": %s\n",
			b->njobs > 1 ? j->uri : "", b->njobs > 1 ? ": " : "",
			trace_op_name(s->r.op), s->r.off, s->r.len, strerror(s->err));
	if (!b->counting)
		return;
	r->ops++;
	j->ops++;
	if (s->r.op == TRACE_OP_READ) {
		r->rd_ops++;
		r->bytes += s->r.len;
	} else if (s->r.op == TRACE_OP_WRITE) {
		r->wr_ops++;
		r->bytes += s->r.len;
	} else {
		r->other_ops++;
	}
	if (b->nlat == b->caplat) {
		uint64_t *nl;
		b->caplat = b->caplat ? b->caplat * 2 : 65536;
		nl = realloc(b->lat, b->caplat * sizeof(*b->lat));
		if (!nl)
			die("out of memory");
		b->lat = nl;
	}
	b->lat[b->nlat++] = t - s->t0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void latency_summary(struct bench *b, struct run *r)
{
	double sum = 0;

	if (!b->nlat)
		return;
	qsort(b->lat, b->nlat, sizeof(*b->lat), cmp_u64);
	for (size_t i = 0; i < b->nlat; i++)
		sum += (double)b->lat[i];
	r->lat_mean = sum / (double)b->nlat / 1e3;
	r->lat_p50 = (double)b->lat[(b->nlat - 1) / 2] / 1e3;
	r->lat_p99 = (double)b->lat[(size_t)ceil(0.99 * (double)b->nlat) - 1] / 1e3;
	r->lat_max = (double)b->lat[b->nlat - 1] / 1e3;
}

/*
 * Wait up to timeout_ms for any handle to be ready and let libnbd move it
 * on (what nbd_poll does for one handle); completions land in b->done.
 */
static void wait_any(struct bench *b, int timeout_ms)
{
	int n;

	for (size_t i = 0; i < b->njobs; i++) {
		struct nbd_handle *h = b->jobs[i].h;
		unsigned dir = nbd_aio_get_direction(h);
		int fd = nbd_aio_get_fd(h);

		if (fd < 0)
			die("%s: %s", b->jobs[i].uri, nbd_get_error());
		b->pfd[i] = (struct pollfd){ .fd = fd };
		if (dir & LIBNBD_AIO_DIRECTION_READ)
			b->pfd[i].events |= POLLIN;
		if (dir & LIBNBD_AIO_DIRECTION_WRITE)
			b->pfd[i].events |= POLLOUT;
	}
	n = poll(b->pfd, b->njobs, timeout_ms);
	if (n < 0) {
		if (errno == EINTR)
			return;
		die("poll: %s", strerror(errno));
	}
	for (size_t i = 0; n > 0 && i < b->njobs; i++) {
		struct job *j = &b->jobs[i];
		short rev = b->pfd[i].revents;
		int rc = 0;

		if (!rev)
			continue;
		n--;
		if (rev & (POLLIN | POLLHUP))
			rc = nbd_aio_notify_read(j->h);
		else if (rev & POLLOUT)
			rc = nbd_aio_notify_write(j->h);
		else if (rev & (POLLERR | POLLNVAL))
			die("%s: server closed the socket unexpectedly", j->uri);
		if (rc < 0)
			die("%s: %s", j->uri, nbd_get_error());
	}
}

/* One closed-loop run of every job at queue depth qd. */
void bench_run_qd(struct bench *b, unsigned qd, struct run *r)
{
	const struct cfg *c = b->c;
	uint64_t t_start = now_ns(), t_count = 0, t_end = 0, counted_issued = 0;
	uint64_t ramp_ns = (uint64_t)(c->ramp * 1e9), run_ns = (uint64_t)(c->runtime * 1e9);
	double cpu0, scpu0;
	bool stop = false;

	if (qd < 1 || qd > MAX_QD)
		die("queue depth %u outside 1..%d", qd, MAX_QD);
	for (size_t k = 0; k < b->njobs; k++) {
		struct job *j = &b->jobs[k];
		j->ops = 0;
		for (unsigned i = 0; i < qd; i++) {
			struct slot *s = &j->slots[i];
			uint64_t x = (uint64_t)i * 7919 + c->seed;
			if (s->buf)
				continue;
			if (posix_memalign((void **)&s->buf, 4096, b->max_len))
				die("out of memory");
			for (uint64_t o = 0; o + 8 <= b->max_len; o += 8) {
				uint64_t w = splitmix(&x);
				memcpy(s->buf + o, &w, 8);
			}
		}
	}
	memset(r, 0, sizeof(*r));
	r->qd = qd;
	r->njobs = (unsigned)b->njobs;
	cpu0 = self_cpu_s();
	scpu0 = proc_cpu_s(c->server_pid);
	b->nlat = 0;
	b->counting = ramp_ns == 0;
	if (b->counting) {
		counters_read(c->admin, &r->c0);
		t_start = t_count = now_ns();
	}
	for (size_t k = 0; k < b->njobs; k++)
		for (unsigned i = 0; i < qd; i++) {
			counted_issued += b->counting;
			refill(&b->jobs[k], &b->jobs[k].slots[i]);
		}
	while (b->inflight) {
		wait_any(b, 100);
		uint64_t t = now_ns();
		size_t n = b->ndone;
		b->ndone = 0;
		for (size_t i = 0; i < n; i++)
			complete(b->done[i], r, t);
		if (!b->counting && t - t_start >= ramp_ns) {
			counters_read(c->admin, &r->c0);
			b->counting = true;
			/* the run starts now: t must not be older than t_count below */
			t = t_count = now_ns();
		}
		if (b->counting && !stop) {
			if (c->ops ? counted_issued >= c->ops : t - t_count >= run_ns)
				stop = true;
		}
		for (size_t k = 0; k < b->njobs; k++) {
			struct job *j = &b->jobs[k];
			for (unsigned i = 0; i < qd; i++) {
				struct slot *s = &j->slots[i];
				if (s->busy)
					continue;
				if (stop) {
					s->pending = false;
					continue;
				}
				if (!s->pending) {
					counted_issued += b->counting;
					refill(j, s);
				} else if (blocks_free(j, &s->r)) {
					submit(j, s);
				}
			}
		}
	}
	t_end = now_ns();
	r->secs = (double)(t_end - t_count) / 1e9;
	r->wall_s = (double)(t_end - t_start) / 1e9;
	r->cpu_s = self_cpu_s() - cpu0;
	r->server_cpu_s = scpu0 < 0 ? -1 : proc_cpu_s(c->server_pid) - scpu0;
	if (scpu0 >= 0 && r->server_cpu_s < 0)
		r->server_cpu_s = -1;
	counters_read(c->admin, &r->c1);
	latency_summary(b, r);
	r->job_ops_min = UINT64_MAX;
	for (size_t k = 0; k < b->njobs; k++) {
		uint64_t o = b->jobs[k].ops;
		r->job_ops_min = o < r->job_ops_min ? o : r->job_ops_min;
		r->job_ops_max = o > r->job_ops_max ? o : r->job_ops_max;
	}
}

/* ---- output ---- */

double ratio(double a, double b)
{
	return b > 0 ? a / b : (double)NAN;
}

static double hit_ratio(const struct run *r)
{
	double h = run_delta(r, CTR_read_hits) + run_delta(r, CTR_write_hits);
	return ratio(h, h + run_delta(r, CTR_read_misses) + run_delta(r, CTR_write_misses));
}

const struct col_desc cols[C_NCOL] = {
	[C_IOPS] = { "IOPS", "iops", false, 0 },
	[C_MBS] = { "MB/s", "mb_s", false, 1 },
	[C_MEAN] = { "lat mean ms", "lat_mean_ms", false, 2 },
	[C_P50] = { "lat p50 ms", "lat_p50_ms", false, 2 },
	[C_P99] = { "lat p99 ms", "lat_p99_ms", false, 2 },
	[C_MAX] = { "lat max ms", "lat_max_ms", false, 2 },
	[C_PROMO] = { "promotions", "promotions", true, 0 },
	[C_PROXW] = { "proxy writes", "proxy_writes", true, 0 },
	[C_PROXR] = { "proxy reads", "proxy_reads", true, 0 },
	[C_FLUSH] = { "flushes", "flushes", true, 0 },
	[C_EVICT] = { "evictions", "evictions", true, 0 },
	[C_HIT] = { "hit ratio", "hit_ratio", true, 3 },
	[C_PROMO_B] = { "promote B/client B", "promote_b_per_client_b", true, 2 },
	[C_BASE_B] = { "base I/O B/client B", "base_io_b_per_client_b", true, 2 },
	[C_CACHE_B] = { "cache I/O B/client B", "cache_io_b_per_client_b", true, 2 },
};

double col_value(const struct run *r, enum col k)
{
	double cb = (double)r->bytes;

	if (cols[k].tierd && !r->c1.ok)
		return (double)NAN;
	if ((k == C_BASE_B || k == C_CACHE_B) && !(r->c0.pools && r->c1.pools))
		return (double)NAN;
	switch (k) {
	case C_IOPS: return ratio((double)r->ops, r->secs);
	case C_MBS: return ratio(cb / 1e6, r->secs);
	case C_MEAN: return r->lat_mean / 1e3;
	case C_P50: return r->lat_p50 / 1e3;
	case C_P99: return r->lat_p99 / 1e3;
	case C_MAX: return r->lat_max / 1e3;
	case C_PROMO: return run_delta(r, CTR_promotions);
	case C_PROXW: return run_delta(r, CTR_proxy_writes);
	case C_PROXR: return run_delta(r, CTR_proxy_reads);
	case C_FLUSH: return run_delta(r, CTR_flushes);
	case C_EVICT: return run_delta(r, CTR_evictions);
	case C_HIT: return hit_ratio(r);
	case C_PROMO_B: return ratio(run_delta(r, CTR_promote_bytes), cb);
	case C_BASE_B: return ratio(run_delta(r, CTR_BASE_IO), cb);
	case C_CACHE_B: return ratio(run_delta(r, CTR_CACHE_IO), cb);
	case C_NCOL: break;
	}
	return (double)NAN;
}

/* A run's table columns and tierd counter deltas as JSON members (",key":value...). */
void json_run_columns(FILE *f, const struct run *r)
{
	for (int k = 0; k < C_NCOL; k++) {
		fprintf(f, ",\"%s\":", cols[k].csv);
		print_num(f, col_value(r, (enum col)k), cols[k].prec + 2, true);
	}
	if (!r->c1.ok)
		return;
	fprintf(f, ",\"tierd_delta\":{");
	for (int k = 0; k < CTR_MAX; k++)
		if (k != CTR_cached_bytes && k != CTR_dirty_bytes)
			fprintf(f, "%s\"%s\":%.0f", k ? "," : "", ctr_names[k],
				run_delta(r, (enum ctr_id)k));
	fprintf(f, "},\"tierd_end\":{\"cached_bytes\":%.0f,\"dirty_bytes\":%.0f}",
		r->c1.v[CTR_cached_bytes], r->c1.v[CTR_dirty_bytes]);
}

void print_num(FILE *f, double v, int prec, bool json)
{
	if (isnan(v))
		fputs(json ? "null" : "", f);
	else
		fprintf(f, "%.*f", prec, v);
}

static void print_table(const struct cfg *c, const struct run *runs, size_t n)
{
	printf("tier-bench%s%s: %s%s%s %s bs %" PRIu64 "%s over %" PRIu64 " MiB\n",
	       c->label ? " " : "", c->label ? c->label : "",
	       c->trace_path ? c->trace_path : c->dist_s,
	       c->pattern_s && !c->trace_path ? " pattern " : "",
	       c->pattern_s && !c->trace_path ? c->pattern_s : "", c->trace_path ? "trace" : c->rw_s,
	       c->bs, c->verify ? " verify" : "", c->size >> 20);
	printf("%-22s", "QD");
	for (size_t i = 0; i < n; i++)
		printf(" %10u", runs[i].qd);
	printf("\n");
	for (int k = 0; k < C_NCOL; k++) {
		if (cols[k].tierd && !c->admin)
			continue;
		printf("%-22s", cols[k].row);
		for (size_t i = 0; i < n; i++) {
			double v = col_value(&runs[i], (enum col)k);
			if (isnan(v))
				printf(" %10s", "-");
			else
				printf(" %10.*f", cols[k].prec, v);
		}
		printf("\n");
	}
	if (c->verify) {
		printf("%-22s", "verified / bad blocks");
		for (size_t i = 0; i < n; i++) {
			char t[48];
			snprintf(t, sizeof(t), "%" PRIu64 "/%" PRIu64, runs[i].verified,
				 runs[i].verify_errors);
			printf(" %10s", t);
		}
		printf("\n");
	}
}

FILE *open_out(const char *path)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;

	if (!f)
		die("%s: %s", path, strerror(errno));
	return f;
}

void close_out(FILE *f, const char *path)
{
	if (ferror(f) || (f != stdout && fclose(f) != 0))
		die("%s: write failed", path);
}

static void write_csv(const struct cfg *c, const struct run *runs, size_t n)
{
	FILE *f = open_out(c->csv);

	fprintf(f, "label,qd,ops,seconds,read_ops,write_ops,client_bytes,io_errors,"
		"verified,verify_errors");
	for (int k = 0; k < C_NCOL; k++)
		fprintf(f, ",%s", cols[k].csv);
	fprintf(f, "\n");
	for (size_t i = 0; i < n; i++) {
		const struct run *r = &runs[i];
		fprintf(f, "%s,%u,%" PRIu64 ",%.3f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
			",%" PRIu64 ",%" PRIu64, c->label ? c->label : "", r->qd, r->ops, r->secs,
			r->rd_ops, r->wr_ops, r->bytes, r->io_errors, r->verified, r->verify_errors);
		for (int k = 0; k < C_NCOL; k++) {
			fputc(',', f);
			print_num(f, col_value(r, (enum col)k), cols[k].prec + 2, false);
		}
		fprintf(f, "\n");
	}
	close_out(f, c->csv);
}

void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void write_json(const struct cfg *c, const struct run *runs, size_t n)
{
	FILE *f = open_out(c->json);

	fprintf(f, "{\"tool\":\"tier-bench\",\"label\":");
	json_str(f, c->label ? c->label : "");
	fprintf(f, ",\"uri\":");
	json_str(f, c->uri);
	fprintf(f, ",\"workload\":");
	json_str(f, c->trace_path ? c->trace_path : c->dist_s);
	fprintf(f, ",\"rw\":");
	json_str(f, c->trace_path ? "trace" : c->rw_s);
	fprintf(f, ",\"bs\":%" PRIu64 ",\"size\":%" PRIu64 ",\"seed\":%u,\"verify\":%s,"
		"\"runs\":[", c->bs, c->size, c->seed, c->verify ? "true" : "false");
	for (size_t i = 0; i < n; i++) {
		const struct run *r = &runs[i];
		fprintf(f, "%s{\"qd\":%u,\"ops\":%" PRIu64 ",\"seconds\":%.3f,\"read_ops\":%"
			PRIu64 ",\"write_ops\":%" PRIu64 ",\"client_bytes\":%" PRIu64
			",\"io_errors\":%" PRIu64 ",\"verified\":%" PRIu64 ",\"verify_errors\":%"
			PRIu64, i ? "," : "", r->qd, r->ops, r->secs, r->rd_ops, r->wr_ops,
			r->bytes, r->io_errors, r->verified, r->verify_errors);
		json_run_columns(f, r);
		fprintf(f, "}");
	}
	fprintf(f, "]}\n");
	close_out(f, c->json);
}

/* ---- command line ---- */

static void usage(FILE *f)
{
	fputs("usage: tier-bench --uri URI [options]\n"
	      "       tier-bench scenario NAME [options]   (tier-bench scenario --help)\n"
	      "  --uri URI          nbd+unix:///EXPORT?socket=PATH or nbd://HOST:PORT/EXPORT\n"
	      "  --admin PATH       tierd's admin socket: report its counter deltas per run\n"
	      "  --qd LIST          queue depths, one closed-loop run each (default 1,2,4,8,16)\n"
	      "  --runtime S        seconds per run (default 10), after --ramp S (default 0)\n"
	      "  --ops N            counted requests per run instead of --runtime\n"
	      "  --dist D           zipf:THETA | pareto:H | uniform | seq (default zipf:1.1)\n"
	      "  --rw RW            write | read | randrw:W (W = write %; default write)\n"
	      "  --pattern P        plain | hotscan | shift | log | vms | loop over --dist, as\n"
	      "                     tier-sim's (tools/gen.h; default plain), with --hot-pct P,\n"
	      "                     --period N, --scan-len N, --parts N\n"
	      "  --bs SIZE          request size (default 4k)\n"
	      "  --size SIZE        bytes of the export to use from offset 0 (default: all)\n"
	      "  --seed N           generator seed (default 1)\n"
	      "  --trace FILE       replay a trace (CSV or fio iolog) in order instead\n"
	      "  --verify           writes carry block number + sequence; reads check them\n"
	      "  --label NAME       name of this configuration in the table, CSV and JSON\n"
	      "  --csv FILE, --json FILE   also write the results there ('-' = stdout)\n", f);
}

uint64_t parse_size(const char *opt, const char *v)
{
	char *e;
	double x;
	uint64_t mul = 1;

	errno = 0;
	x = strtod(v, &e);
	switch (*e) {
	case 'k': case 'K': mul = 1ull << 10; e++; break;
	case 'm': case 'M': mul = 1ull << 20; e++; break;
	case 'g': case 'G': mul = 1ull << 30; e++; break;
	case 't': case 'T': mul = 1ull << 40; e++; break;
	default: break;
	}
	if (*e == 'i' || *e == 'B')
		e += *e == 'i' ? (e[1] == 'B' ? 2 : 1) : 1;
	if (errno || e == v || *e || x < 0 || x * (double)mul > 1.8e19)
		die("%s: bad size '%s'", opt, v);
	return (uint64_t)(x * (double)mul);
}

double parse_num(const char *opt, const char *v, double lo, double hi)
{
	char *e;
	double x;

	errno = 0;
	x = strtod(v, &e);
	if (errno || e == v || *e || x < lo || x > hi)
		die("%s: '%s' is not a number in [%g, %g]", opt, v, lo, hi);
	return x;
}

void parse_qds(struct cfg *c, const char *v)
{
	char *dup = strdup(v), *save = NULL, *t;

	if (!dup)
		die("out of memory");
	c->nqd = 0;
	for (t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (c->nqd == MAX_QDS)
			die("--qd: at most %d queue depths", MAX_QDS);
		c->qds[c->nqd++] = (unsigned)parse_num("--qd", t, 1, MAX_QD);
	}
	free(dup);
	if (!c->nqd)
		die("--qd: empty list");
}

static void parse_args(struct cfg *c, int argc, char **argv)
{
	static const struct option lo[] = {
		{"uri", 1, NULL, 'u'}, {"admin", 1, NULL, 'a'}, {"qd", 1, NULL, 'q'},
		{"runtime", 1, NULL, 't'}, {"ramp", 1, NULL, 'R'}, {"ops", 1, NULL, 'n'},
		{"dist", 1, NULL, 'd'}, {"rw", 1, NULL, 'w'}, {"bs", 1, NULL, 'b'},
		{"size", 1, NULL, 'S'}, {"seed", 1, NULL, 's'}, {"trace", 1, NULL, 'T'},
		{"verify", 0, NULL, 'V'}, {"label", 1, NULL, 'l'}, {"csv", 1, NULL, 'c'},
		{"json", 1, NULL, 'j'}, {"help", 0, NULL, 'h'}, {"pattern", 1, NULL, 'P'},
		{"hot-pct", 1, NULL, 'H'}, {"period", 1, NULL, 'E'}, {"scan-len", 1, NULL, 'L'},
		{"parts", 1, NULL, 'A'}, {NULL, 0, NULL, 0},
	};
	int o;

	*c = (struct cfg){ .runtime = 10, .bs = 4096, .seed = 1, .write_pct = 100,
			   .dist_s = "zipf:1.1", .rw_s = "write" };
	parse_qds(c, "1,2,4,8,16");
	while ((o = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (o) {
		case 'u': c->uri = optarg; break;
		case 'a': c->admin = optarg; break;
		case 'q': parse_qds(c, optarg); break;
		case 't': c->runtime = parse_num("--runtime", optarg, 0.01, 1e6); break;
		case 'R': c->ramp = parse_num("--ramp", optarg, 0, 1e6); break;
		case 'n': c->ops = (uint64_t)parse_num("--ops", optarg, 1, 1e15); break;
		case 'd': c->dist_s = optarg; break;
		case 'w': c->rw_s = optarg; break;
		case 'b': c->bs = parse_size("--bs", optarg); break;
		case 'S': c->size = parse_size("--size", optarg); break;
		case 's': c->seed = (uint32_t)parse_num("--seed", optarg, 0, 4294967295.0); break;
		case 'T': c->trace_path = optarg; break;
		case 'V': c->verify = true; break;
		case 'l': c->label = optarg; break;
		case 'c': c->csv = optarg; break;
		case 'j': c->json = optarg; break;
		case 'P': c->pattern_s = optarg; break;
		case 'H': c->hot_pct = (uint32_t)parse_num("--hot-pct", optarg, 1, 99); break;
		case 'E': c->period = (uint64_t)parse_num("--period", optarg, 1, 1e15); break;
		case 'L': c->scan_len = (uint64_t)parse_num("--scan-len", optarg, 1, 1e15); break;
		case 'A': c->parts = (uint32_t)parse_num("--parts", optarg, 1, GEN_MAX_PARTS); break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind != argc || !c->uri) {
		usage(stderr);
		exit(2);
	}
	if (gen_dist_parse(c->dist_s, &c->dist, &c->dist_param) < 0)
		die("--dist: '%s' is not zipf:THETA, pareto:H, uniform or seq", c->dist_s);
	if (gen_parse_rw(c->rw_s, &c->write_pct) < 0)
		die("--rw: '%s' is not read, write or randrw:W", c->rw_s);
	if (c->pattern_s && gen_parse_pattern(c->pattern_s, &c->pattern) < 0)
		die("--pattern: plain, hotscan, shift, log, vms or loop, got '%s'", c->pattern_s);
	if (c->bs < 512 || c->bs % 512 || c->bs > (32u << 20))
		die("--bs: a multiple of 512 up to 32M");
	if (c->verify && c->bs > (1u << 20))
		die("--verify: --bs at most 1M");
}

/* ---- set-up ---- */

static void load_trace(struct bench *b, uint64_t size)
{
	const struct cfg *c = b->c;
	char err[256] = "";
	int rc = trace_load(c->trace_path, &b->tr, err, sizeof(err));

	if (rc < 0)
		die("%s: %s", c->trace_path, err[0] ? err : strerror(-rc));
	if (!b->tr.n)
		die("%s: no requests", c->trace_path);
	for (size_t i = 0; i < b->tr.n; i++) {
		const struct trace_rec *t = &b->tr.recs[i];
		if (t->op == TRACE_OP_FLUSH)
			continue;
		if (t->off + t->len > size || !t->len)
			die("%s: request %zu (%" PRIu64 "+%" PRIu64 ") is outside the %" PRIu64
			    "-byte export", c->trace_path, i + 1, t->off, t->len, size);
		if (c->verify && (t->off % c->bs || t->len % c->bs))
			die("%s: request %zu is not aligned to --bs (needed by --verify)",
			    c->trace_path, i + 1);
		if (t->len > b->max_len)
			b->max_len = t->len;
	}
	if (b->max_len > (64u << 20))
		die("%s: requests up to 64 MiB", c->trace_path);
}

static void job_open(struct bench *b, struct job *j, struct cfg *c, const char *uri,
		     uint32_t seed)
{
	uint64_t want = c->size;
	int64_t sz;

	j->b = b;
	j->uri = uri;
	j->slots = calloc(MAX_QD, sizeof(*j->slots));
	if (!j->slots)
		die("out of memory");
	for (unsigned i = 0; i < MAX_QD; i++)
		j->slots[i].j = j;
	j->h = nbd_create();
	if (!j->h || nbd_connect_uri(j->h, uri) < 0)
		die("%s: %s", uri, nbd_get_error());
	sz = nbd_get_size(j->h);
	if (sz < 0)
		die("%s: %s", uri, nbd_get_error());
	if (!want)
		want = (uint64_t)sz;
	if (want > (uint64_t)sz || want < c->bs)
		die("--size %" PRIu64 ": the export %s has %" PRId64 " bytes", want, uri, sz);
	j->size = want;
	if (!c->trace_path) {
		struct gen_workload_opts o = { .type = c->dist, .param = c->dist_param,
			.write_pct = c->write_pct, .bs = c->bs, .size = j->size, .seed = seed,
			.pattern = c->pattern, .hot_pct = c->hot_pct, .period = c->period,
			.scan_len = c->scan_len, .parts = c->parts };
		if (gen_workload_init(&j->wl, &o) < 0)
			die("generator: bad parameters");
	}
	if (c->verify) {
		uint64_t nblk = j->size / c->bs;
		uint64_t t = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ seed;
		j->run_id = splitmix(&t);
		j->expect = calloc(nblk, sizeof(*j->expect));
		j->busy_blk = calloc(nblk, 1);
		if (!j->expect || !j->busy_blk)
			die("--verify: no memory for %" PRIu64 " blocks", nblk);
	}
}

struct bench *bench_open(struct cfg *c, const char *const *uris, size_t nuris)
{
	struct bench *b = calloc(1, sizeof(*b));

	if (!b || !nuris)
		die(b ? "no export to drive" : "out of memory");
	b->c = c;
	b->njobs = nuris;
	b->max_len = c->bs;
	b->jobs = calloc(nuris, sizeof(*b->jobs));
	b->done = calloc(nuris * MAX_QD, sizeof(*b->done));
	b->pfd = calloc(nuris, sizeof(*b->pfd));
	if (!b->jobs || !b->done || !b->pfd)
		die("out of memory");
	for (size_t i = 0; i < nuris; i++)
		job_open(b, &b->jobs[i], c, uris[i], c->seed + (uint32_t)i);
	if (!c->size)
		c->size = b->jobs[0].size;
	if (c->trace_path) {
		uint64_t smallest = b->jobs[0].size;
		for (size_t i = 1; i < nuris; i++)
			smallest = b->jobs[i].size < smallest ? b->jobs[i].size : smallest;
		load_trace(b, smallest);
	}
	return b;
}

void bench_close(struct bench *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->njobs; i++) {
		struct job *j = &b->jobs[i];
		if (j->h) {
			nbd_shutdown(j->h, 0);
			nbd_close(j->h);
		}
		for (unsigned k = 0; j->slots && k < MAX_QD; k++)
			free(j->slots[k].buf);
		free(j->slots);
		free(j->expect);
		free(j->busy_blk);
	}
	free(b->jobs);
	free(b->done);
	free(b->pfd);
	free(b->lat);
	trace_free(&b->tr);
	free(b);
}

int main(int argc, char **argv)
{
	struct run runs[MAX_QDS];
	struct bench *b;
	struct cfg c;
	uint64_t io_errors = 0, verify_errors = 0;

	if (argc > 1 && !strcmp(argv[1], "scenario"))
		return scenario_main(argc - 1, argv + 1);
	parse_args(&c, argc, argv);
	b = bench_open(&c, &c.uri, 1);
	for (size_t i = 0; i < c.nqd; i++) {
		bench_run_qd(b, c.qds[i], &runs[i]);
		io_errors += runs[i].io_errors;
		verify_errors += runs[i].verify_errors;
		fprintf(stderr, "tier-bench: QD %u: %" PRIu64 " requests in %.1f s\n",
			c.qds[i], runs[i].ops, runs[i].secs);
	}
	print_table(&c, runs, c.nqd);
	if (c.csv)
		write_csv(&c, runs, c.nqd);
	if (c.json)
		write_json(&c, runs, c.nqd);
	bench_close(b);
	if (io_errors || verify_errors) {
		fprintf(stderr, "tier-bench: %" PRIu64 " I/O errors, %" PRIu64
			" blocks failed verification\n", io_errors, verify_errors);
		return 1;
	}
	return 0;
}
