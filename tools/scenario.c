/* SPDX-License-Identifier: MIT */
/*
 * scenario.c - `tier-bench scenario seed004`: the benchmark of seed 004 (20
 * VMs, each running fio on its own RBD image: 4 KiB random writes,
 * zipf:1.1, working set 4x target_max_bytes) replayed against tierd on its
 * local backend.  For every (variant, base profile) it writes a config into
 * a fresh temp dir, starts tierd, drives one job per image with tier-bench's
 * engine (bench.h) at each queue depth, stops tierd (SIGTERM, wait) and
 * removes the dir; then it prints the seed-shaped tables, the published
 * numbers beside, the goal ratios, and optionally checks tier-bench's
 * numbers against real fio.
 *
 * The load runs in a child process that hands each run back through a pipe,
 * so that anything going wrong in it (tierd dies, a connection fails, the
 * admin socket stops answering) fails that variant and not the whole
 * scenario; a variant that failed, or a run with an I/O error, is reported
 * as FAILED with its reason, never as a number.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libnbd.h>

#include "bench.h"

#define MAX_IMAGES   1024
#define MAX_TASKS    64
#define ERR_LEN      480

/* ---- the seed's published numbers (aggregate IOPS over 20 VMs; ms) ---- */
struct seed_ref {
	const char *what;
	unsigned qd[5];
	double iops[5], lat_ms[5];
};

static const struct seed_ref seed_no_proxy = {
	"seed 004 without proxy write", { 1, 2, 4, 8, 16 },
	{ 190, 200, 203, 201, 198 }, { 100.43, 191.9, 380.57, 775.15, 1600.66 } };
static const struct seed_ref seed_proxy = {
	"seed 004 with proxy write", { 1, 2, 4, 8, 16 },
	{ 902, 896, 1067, 1207, 1486 }, { 22.08, 44.43, 74.83, 133.12, 217.42 } };

static int seed_index(const struct seed_ref *s, unsigned qd)
{
	for (int i = 0; s && i < 5; i++)
		if (s->qd[i] == qd)
			return i;
	return -1;
}

/* ---- variants: explicit [tier] keys so they do not follow tierd's defaults ---- */
#define SEED_CACHE "cache_target_dirty_ratio = 0.4\n" \
		   "cache_target_dirty_high_ratio = 0.6\n" \
		   "cache_target_full_ratio = 0.8\n"

struct variant {
	const char *name, *what;
	const char *tier;            /* [tier] lines besides target_max_bytes */
	const char *profile;         /* fixed base profile, NULL = each --base-profile */
	const struct seed_ref *seed;
};

static const struct variant variants[] = {
	{ "base", "the base pool alone", "cache_mode = none\nobject_size = 4M\n" SEED_CACHE,
	  NULL, NULL },
	{ "ssd", "the SSD alone (as base pool)", "cache_mode = none\nobject_size = 4M\n" SEED_CACHE,
	  "ssd", NULL },
	{ "promote-always", "promote every miss (Ceph without proxy write)",
	  "cache_mode = writeback\nobject_size = 4M\npromote_granularity = object\n"
	  "evict_policy = hitset\nwrite_miss = promote\nmin_write_recency_for_promote = 0\n"
	  "min_read_recency_for_promote = 0\npromote_max_bytes_sec = 0\n"
	  "promote_max_objects_sec = 0\n" SEED_CACHE, NULL, &seed_no_proxy },
	{ "ceph", "Ceph with proxy write, recency 1, promote throttle",
	  "cache_mode = writeback\nobject_size = 4M\npromote_granularity = object\n"
	  "evict_policy = hitset\nwrite_miss = proxy\nmin_write_recency_for_promote = 1\n"
	  "min_read_recency_for_promote = 1\npromote_max_bytes_sec = 5M\n"
	  "promote_max_objects_sec = 25\n" SEED_CACHE, NULL, &seed_proxy },
	{ "defaults", "tierd's defaults (only target_max_bytes set)", "", NULL, NULL },
};
#define NVARIANTS (sizeof(variants) / sizeof(variants[0]))

static const struct variant *variant_find(const char *name)
{
	for (size_t i = 0; i < NVARIANTS; i++)
		if (!strcmp(variants[i].name, name))
			return &variants[i];
	return NULL;
}

/* ---- options ---- */
struct sopts {
	const char *tierd, *fio, *csv, *json, *svg;
	unsigned images;
	uint64_t image_size, target;
	unsigned qds[MAX_QDS];
	size_t nqd;
	double runtime, ramp;
	uint32_t seed;
	const struct variant *var[NVARIANTS];
	size_t nvar;
	char *profiles[8];
	size_t nprof;
	bool fio_check;
	unsigned fio_qd;
	const struct variant *fio_var;
};

/* ---- one tierd instance and the load against it ---- */
struct task {
	const struct variant *v;
	const char *profile;
	bool started, ok;            /* ok: tierd ran, every run is ok, tierd stopped with 0 */
	char err[ERR_LEN];
	size_t nqd, nruns;           /* runs received */
	unsigned qds[MAX_QDS];
	struct run runs[MAX_QDS];
	bool run_ok[MAX_QDS];
	char run_err[MAX_QDS][128];
	double wall_s, start_s;
	char *config;                /* the [tier] lines used */
};

struct fio_res {
	const struct variant *v;     /* --fio-variant, default defaults */
	const char *profile;
	bool ran, ok;
	char err[ERR_LEN];
	unsigned qd;
	double iops, lat_mean_ms;
	double wall_s, cpu_s, tierd_cpu_s;   /* fio's run: wall, fio's CPU, tierd's CPU */
	struct task tb;              /* tier-bench's run at the same QD, fresh tierd */
};

static volatile pid_t g_tierd = -1, g_child = -1;
static char g_dir[256];

static void on_signal(int sig)
{
	static const char m1[] = "tier-bench scenario: interrupted; left ";

	if (g_tierd > 0)
		kill(g_tierd, SIGKILL);
	if (g_child > 0)
		kill(g_child, SIGKILL);
	if (write(2, m1, sizeof(m1) - 1) >= 0 && write(2, g_dir, strlen(g_dir)) >= 0 &&
	    write(2, "\n", 1) >= 0) {
		/* nothing more to do */
	}
	_exit(128 + sig);
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("[scenario] ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static double mono_s(void)
{
	return (double)now_ns() / 1e9;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void set_err(char *dst, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(char *dst, const char *fmt, ...)
{
	va_list ap;

	if (dst[0])
		return;     /* the first reason wins */
	va_start(ap, fmt);
	vsnprintf(dst, ERR_LEN, fmt, ap);
	va_end(ap);
	for (char *p = dst; *p; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
}

/* The last non-empty lines of a file (what tierd said before failing). */
static void file_tail(const char *path, char *out, size_t len)
{
	char buf[4096], *lines[3] = { NULL, NULL, NULL };
	FILE *f = fopen(path, "re");
	size_t n;
	long sz;

	out[0] = '\0';
	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	sz = ftell(f);
	fseek(f, sz > (long)sizeof(buf) - 1 ? sz - (long)sizeof(buf) + 1 : 0, SEEK_SET);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	for (char *save = NULL, *t = strtok_r(buf, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
		if (!*t)
			continue;
		lines[0] = lines[1];
		lines[1] = lines[2];
		lines[2] = t;
	}
	for (int i = 0; i < 3; i++)
		if (lines[i]) {
			size_t used = strlen(out);
			snprintf(out + used, len - used, "%s%s", used ? " | " : "", lines[i]);
		}
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p) < 0 ? -1 : 0;
}

static void rm_tree(const char *dir)
{
	if (dir[0] && nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) < 0)
		say("could not remove %s: %s", dir, strerror(errno));
}

static bool write_config(const struct sopts *o, const struct task *t, const char *dir)
{
	char path[PATH_MAX];
	unsigned maxqd = 0;
	FILE *f;

	for (size_t i = 0; i < t->nqd; i++)
		maxqd = t->qds[i] > maxqd ? t->qds[i] : maxqd;
	snprintf(path, sizeof(path), "%s/tierd.conf", dir);
	f = fopen(path, "we");
	if (!f)
		return false;
	fprintf(f, "# tier-bench scenario seed004: variant %s, base_profile %s\n"
		"[global]\nbackend = local\nlisten = unix:%s/nbd.sock\n"
		"admin_socket = %s/tierd.asok\nlog_level = info\n",
		t->v->name, t->profile, dir, dir);
	if (maxqd > 64)     /* tierd's default is 64 requests in flight per connection */
		fprintf(f, "max_requests_per_conn = %u\n", maxqd > 4096 ? 4096 : maxqd);
	fprintf(f, "\n[local]\ndata_dir = %s/data\nbase_profile = %s\ncache_profile = ssd\n"
		"\n[tier]\ntarget_max_bytes = %" PRIu64 "\n%s", dir, t->profile, o->target,
		t->v->tier);
	for (unsigned i = 0; i < o->images; i++)
		fprintf(f, "\n[image.vol%u]\nsize = %" PRIu64 "\n", i, o->image_size);
	return fclose(f) == 0;
}

static pid_t spawn(const char *const *argv, const char *out_path)
{
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid == 0) {
		int fd = open(out_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		if (fd < 0 || nul < 0 || dup2(nul, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(126);
		execvp(argv[0], (char *const *)argv);
		dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

static void describe_status(char *out, size_t len, int st)
{
	if (WIFEXITED(st))
		snprintf(out, len, "exited with status %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(out, len, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		snprintf(out, len, "status 0x%x", st);
}

/* waitpid with a deadline; SIGKILL after it.  Returns the status, *timed_out set. */
static int wait_deadline_ru(pid_t pid, double secs, bool *timed_out, struct rusage *ru)
{
	double end = mono_s() + secs;
	struct rusage dummy;
	int st = 0;

	*timed_out = false;
	for (;;) {
		pid_t r = wait4(pid, &st, WNOHANG, ru ? ru : &dummy);
		if (r == pid)
			return st;
		if (r < 0 && errno != EINTR)
			return -1;
		if (mono_s() > end) {
			*timed_out = true;
			kill(pid, SIGKILL);
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			return st;
		}
		sleep_ms(20);
	}
}

static int wait_deadline(pid_t pid, double secs, bool *timed_out)
{
	return wait_deadline_ru(pid, secs, timed_out, NULL);
}

static bool nbd_probe(const char *uri)
{
	struct nbd_handle *h = nbd_create();
	bool ok = h && nbd_connect_uri(h, uri) == 0 && nbd_get_size(h) > 0;

	if (h) {
		if (ok)
			nbd_shutdown(h, 0);
		nbd_close(h);
	}
	return ok;
}

/* ---- the load process ---- */
struct msg {
	uint32_t kind;               /* MSG_RUN or MSG_ERR */
	struct run r;
	char err[ERR_LEN];
};
enum { MSG_RUN = 1, MSG_ERR = 2 };

static int g_msg_fd = -1;

static void msg_send(const struct msg *m)
{
	const char *p = (const char *)m;
	size_t left = sizeof(*m);

	while (left) {
		ssize_t n = write(g_msg_fd, p, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(3);
		p += n;
		left -= (size_t)n;
	}
}

static void child_die_hook(const char *why)
{
	static struct msg m;

	memset(&m, 0, sizeof(m));
	m.kind = MSG_ERR;
	snprintf(m.err, sizeof(m.err), "%s", why);
	msg_send(&m);
}

static void load_child(const struct sopts *o, const struct task *t, const char *dir, int fd,
		       pid_t tierd)
{
	static struct msg m;
	char **uris = calloc(o->images, sizeof(*uris));
	struct bench *b;
	struct cfg c = { .runtime = o->runtime, .ramp = o->ramp, .bs = 4096, .seed = o->seed,
			 .write_pct = 100, .dist_s = "zipf:1.1", .rw_s = "write" };
	char asok[PATH_MAX];

	g_msg_fd = fd;
	die_hook = child_die_hook;
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	if (!uris)
		die("out of memory");
	snprintf(asok, sizeof(asok), "%s/tierd.asok", dir);
	c.admin = asok;
	c.server_pid = (int)tierd;
	if (gen_dist_parse(c.dist_s, &c.dist, &c.dist_param) < 0)
		die("zipf:1.1: generator refused");
	for (unsigned i = 0; i < o->images; i++)
		if (asprintf(&uris[i], "nbd+unix:///vol%u?socket=%s/nbd.sock", i, dir) < 0)
			die("out of memory");
	b = bench_open(&c, (const char *const *)uris, o->images);
	for (size_t i = 0; i < t->nqd; i++) {
		memset(&m, 0, sizeof(m));
		m.kind = MSG_RUN;
		bench_run_qd(b, t->qds[i], &m.r);
		msg_send(&m);
	}
	bench_close(b);
	for (unsigned i = 0; i < o->images; i++)
		free(uris[i]);
	free(uris);
	close(fd);
	exit(0);
}

static bool read_full(int fd, void *buf, size_t len, double deadline, bool *eof, bool *late)
{
	char *p = buf;
	size_t got = 0;

	*eof = *late = false;
	while (got < len) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		double left = deadline - mono_s();
		int r;
		ssize_t n;

		if (left <= 0) {
			*late = true;
			return false;
		}
		r = poll(&pfd, 1, left > 1 ? 1000 : (int)(left * 1000) + 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			continue;
		n = read(fd, p + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			*eof = true;
			return false;
		}
		got += (size_t)n;
	}
	return true;
}

static void stop_tierd(struct task *t, pid_t pid, const char *log)
{
	char why[96], tail[ERR_LEN];
	bool late;
	int st;

	kill(pid, SIGTERM);
	st = wait_deadline(pid, 60, &late);
	g_tierd = -1;
	if (late) {
		set_err(t->err, "tierd did not exit within 60 s of SIGTERM (killed)");
	} else if (st != 0) {
		describe_status(why, sizeof(why), st);
		file_tail(log, tail, sizeof(tail));
		set_err(t->err, "tierd %s after SIGTERM: %s", why, tail);
	}
}

/* Run one task: tierd up, the load at t->qds, tierd down, dir removed. */
static void run_task(const struct sopts *o, struct task *t)
{
	char dir[] = "/tmp/tier-scenario.XXXXXX", conf[PATH_MAX], log[PATH_MAX];
	char uri0[PATH_MAX + 64], sock[PATH_MAX], tail[ERR_LEN], why[96], lerr[ERR_LEN] = "";
	const char *argv[] = { o->tierd, "--config", conf, NULL };
	double t0 = mono_s(), deadline;
	int pfd[2], st;
	pid_t tierd, child;
	bool up = false, late, eof;

	t->wall_s = 0;
	if (!mkdtemp(dir)) {
		set_err(t->err, "mkdtemp: %s", strerror(errno));
		return;
	}
	snprintf(g_dir, sizeof(g_dir), "%s", dir);
	snprintf(conf, sizeof(conf), "%s/tierd.conf", dir);
	snprintf(log, sizeof(log), "%s/tierd.log", dir);
	snprintf(sock, sizeof(sock), "%s/nbd.sock", dir);
	snprintf(uri0, sizeof(uri0), "nbd+unix:///vol0?socket=%s", sock);
	if (!write_config(o, t, dir)) {
		set_err(t->err, "%s: cannot write the config: %s", conf, strerror(errno));
		rm_tree(dir);
		return;
	}
	tierd = spawn(argv, log);
	if (tierd < 0) {
		set_err(t->err, "fork: %s", strerror(errno));
		rm_tree(dir);
		return;
	}
	g_tierd = tierd;
	while (mono_s() - t0 < 120) {
		pid_t r = waitpid(tierd, &st, WNOHANG);
		if (r == tierd) {
			g_tierd = -1;
			describe_status(why, sizeof(why), st);
			file_tail(log, tail, sizeof(tail));
			set_err(t->err, "tierd %s at start-up: %s", why, tail);
			rm_tree(dir);
			t->wall_s = mono_s() - t0;
			return;
		}
		if (access(sock, F_OK) == 0 && nbd_probe(uri0)) {
			up = true;
			break;
		}
		sleep_ms(50);
	}
	t->started = true;
	t->start_s = mono_s() - t0;
	if (!up) {
		set_err(t->err, "tierd did not serve %s within 120 s", uri0);
		stop_tierd(t, tierd, log);
		rm_tree(dir);
		return;
	}
	say("%s/%s: tierd %d up in %.1f s (%s)", t->v->name, t->profile, (int)tierd,
	    t->start_s, dir);
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		set_err(t->err, "pipe: %s", strerror(errno));
		stop_tierd(t, tierd, log);
		rm_tree(dir);
		return;
	}
	fflush(stdout);
	fflush(stderr);
	child = fork();
	if (child == 0) {
		close(pfd[0]);
		load_child(o, t, dir, pfd[1], tierd);
	}
	close(pfd[1]);
	if (child < 0) {
		set_err(t->err, "fork: %s", strerror(errno));
		close(pfd[0]);
		stop_tierd(t, tierd, log);
		rm_tree(dir);
		return;
	}
	g_child = child;
	/* connecting 1024 images takes a while; each run gets ramp + runtime and slack for draining */
	deadline = mono_s() + 120 + 2 * (o->ramp + o->runtime);
	while (t->nruns < t->nqd) {
		static struct msg m;
		if (!read_full(pfd[0], &m, sizeof(m), deadline, &eof, &late)) {
			if (late)
				set_err(lerr, "no result for QD %u within the deadline (tierd stalled?)",
					t->qds[t->nruns]);
			break;
		}
		if (m.kind == MSG_ERR) {
			set_err(lerr, "load: %s", m.err);
			break;
		}
		size_t k = t->nruns++;
		const struct run *r = &m.r;
		t->runs[k] = *r;
		t->run_ok[k] = true;
		if (r->io_errors) {
			t->run_ok[k] = false;
			snprintf(t->run_err[k], sizeof(t->run_err[k]), "%" PRIu64 " I/O errors",
				 r->io_errors);
		} else if (!r->ops || r->secs <= 0) {
			t->run_ok[k] = false;
			snprintf(t->run_err[k], sizeof(t->run_err[k]), "no request completed");
		} else if (!r->c1.ok || !r->c0.ok) {
			t->run_ok[k] = false;
			snprintf(t->run_err[k], sizeof(t->run_err[k]), "no tierd counters");
		}
		if (t->run_ok[k])
			say("%s/%s: QD %u per job (%u outstanding): %.0f IOPS, mean %.2f ms, "
			    "p99 %.2f ms", t->v->name, t->profile, r->qd, r->qd * r->njobs,
			    col_value(r, C_IOPS), r->lat_mean / 1e3, r->lat_p99 / 1e3);
		else
			say("%s/%s: QD %u per job: FAILED: %s", t->v->name, t->profile, r->qd,
			    t->run_err[k]);
		deadline = mono_s() + 60 + 2 * (o->ramp + o->runtime);
	}
	close(pfd[0]);
	if (t->nruns < t->nqd) {
		kill(child, SIGKILL);
	}
	st = wait_deadline(child, 30, &late);
	g_child = -1;
	if (st != 0 && t->nruns == t->nqd) {
		describe_status(why, sizeof(why), st);
		set_err(lerr, "load process %s", why);
	} else if (t->nruns < t->nqd) {
		describe_status(why, sizeof(why), st);
		set_err(lerr, "load process %s after %zu of %zu runs", why, t->nruns, t->nqd);
	}
	/* did tierd die under the load?  That is the reason, the load's error its effect */
	if (waitpid(tierd, &st, WNOHANG) == tierd) {
		g_tierd = -1;
		describe_status(why, sizeof(why), st);
		file_tail(log, tail, sizeof(tail));
		set_err(t->err, "tierd %s during the load (%s): %.200s", why,
			lerr[0] ? lerr : "no load error", tail);
	} else {
		if (lerr[0])
			set_err(t->err, "%s", lerr);
		stop_tierd(t, tierd, log);
	}
	rm_tree(dir);
	g_dir[0] = '\0';
	t->ok = !t->err[0] && t->nruns == t->nqd;
	for (size_t i = 0; i < t->nruns; i++)
		if (!t->run_ok[i]) {
			t->ok = false;
			set_err(t->err, "QD %u: %s", t->qds[i], t->run_err[i]);
		}
	t->wall_s = mono_s() - t0;
}

/* The run of t at qd if it is a good one. */
static const struct run *task_run(const struct task *t, unsigned qd)
{
	if (!t || !t->started)
		return NULL;
	for (size_t i = 0; i < t->nruns; i++)
		if (t->runs[i].qd == qd && t->run_ok[i])
			return &t->runs[i];
	return NULL;
}

/* ---- fio ---- */

/* The number after "key" : at or after p (fio's pretty JSON), NULL if none. */
static const char *json_after(const char *p, const char *key, double *v)
{
	char pat[64];
	const char *q;
	char *e;

	snprintf(pat, sizeof(pat), "\"%s\"", key);
	for (q = p ? strstr(p, pat) : NULL; q; q = strstr(q + 1, pat)) {
		const char *x = q + strlen(pat);
		while (*x == ' ')
			x++;
		if (*x != ':')
			continue;
		x++;
		while (*x == ' ')
			x++;
		if (!v)
			return x;
		*v = strtod(x, &e);
		if (e != x)
			return e;
	}
	return NULL;
}

static void fio_check(const struct sopts *o, struct fio_res *f)
{
	char dir[] = "/tmp/tier-scenario.XXXXXX", conf[PATH_MAX], log[PATH_MAX];
	char sock[PATH_MAX], uri0[PATH_MAX + 64], out[PATH_MAX], errp[PATH_MAX], why[96];
	char tail[ERR_LEN], iod[32], rt[48], ramp[48];
	const char **argv;
	struct task t = { .v = f->v, .profile = f->profile, .nqd = 1,
			  .qds = { f->qd } };
	double t0 = mono_s(), iops = 0, err = 0, mean = 0;
	size_t na = 0, nfixed;
	pid_t tierd, fio;
	bool late, up = false;
	int st;
	char *buf = NULL, *p;
	long sz;
	FILE *fp;

	f->ran = true;
	if (!mkdtemp(dir)) {
		set_err(f->err, "mkdtemp: %s", strerror(errno));
		return;
	}
	snprintf(g_dir, sizeof(g_dir), "%s", dir);
	snprintf(conf, sizeof(conf), "%s/tierd.conf", dir);
	snprintf(log, sizeof(log), "%s/tierd.log", dir);
	snprintf(sock, sizeof(sock), "%s/nbd.sock", dir);
	snprintf(out, sizeof(out), "%s/fio.json", dir);
	snprintf(errp, sizeof(errp), "%s/fio.log", dir);
	snprintf(uri0, sizeof(uri0), "nbd+unix:///vol0?socket=%s", sock);
	if (!write_config(o, &t, dir)) {
		set_err(f->err, "cannot write the config");
		rm_tree(dir);
		return;
	}
	{
		const char *targv[] = { o->tierd, "--config", conf, NULL };
		tierd = spawn(targv, log);
	}
	if (tierd < 0) {
		set_err(f->err, "fork: %s", strerror(errno));
		rm_tree(dir);
		return;
	}
	g_tierd = tierd;
	while (mono_s() - t0 < 120) {
		if (waitpid(tierd, &st, WNOHANG) == tierd) {
			g_tierd = -1;
			describe_status(why, sizeof(why), st);
			file_tail(log, tail, sizeof(tail));
			set_err(f->err, "tierd %s at start-up: %s", why, tail);
			rm_tree(dir);
			return;
		}
		if (access(sock, F_OK) == 0 && nbd_probe(uri0)) {
			up = true;
			break;
		}
		sleep_ms(50);
	}
	if (!up) {
		set_err(f->err, "tierd did not start serving within 120 s");
		goto stop;
	}
	say("fio check: %s/%s: tierd %d up; fio at QD %u per job over %u images",
	    t.v->name, t.profile, (int)tierd, f->qd, o->images);
	argv = calloc(20 + 2 * (size_t)o->images, sizeof(*argv));
	if (!argv) {
		set_err(f->err, "out of memory");
		goto stop;
	}
	snprintf(iod, sizeof(iod), "--iodepth=%u", f->qd);
	snprintf(rt, sizeof(rt), "--runtime=%.0fms", o->runtime * 1e3);
	snprintf(ramp, sizeof(ramp), "--ramp_time=%.0fms", o->ramp * 1e3);
	argv[na++] = o->fio;
	argv[na++] = "--output-format=json";
	argv[na++] = "--output";
	argv[na++] = out;
	argv[na++] = "--ioengine=nbd";
	argv[na++] = "--rw=randwrite";
	argv[na++] = "--bs=4k";
	argv[na++] = "--random_distribution=zipf:1.1";
	argv[na++] = "--norandommap";
	argv[na++] = iod;
	argv[na++] = "--time_based";
	argv[na++] = rt;
	argv[na++] = ramp;
	argv[na++] = "--group_reporting";
	nfixed = na;
	for (unsigned i = 0; i < o->images; i++) {
		char *n = NULL, *u = NULL;
		if (asprintf(&n, "--name=v%u", i) < 0) {
			set_err(f->err, "out of memory");
			break;
		}
		if (asprintf(&u, "--uri=nbd+unix:///vol%u?socket=%s", i, sock) < 0) {
			free(n);
			set_err(f->err, "out of memory");
			break;
		}
		argv[na++] = n;
		argv[na++] = u;
	}
	argv[na] = NULL;
	if (!f->err[0]) {
		struct rusage ru = { 0 };
		double w0 = mono_s(), c0 = proc_cpu_s((int)tierd), c1;
		fio = spawn(argv, errp);
		g_child = fio;
		st = fio < 0 ? -1 : wait_deadline_ru(fio, 120 + 3 * (o->ramp + o->runtime), &late, &ru);
		g_child = -1;
		c1 = proc_cpu_s((int)tierd);
		f->wall_s = mono_s() - w0;
		f->cpu_s = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
			   (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
		f->tierd_cpu_s = c0 >= 0 && c1 >= 0 ? c1 - c0 : -1;
		if (fio < 0) {
			set_err(f->err, "fork: %s", strerror(errno));
		} else if (late) {
			set_err(f->err, "fio did not finish in time (killed)");
		} else if (st != 0) {
			describe_status(why, sizeof(why), st);
			file_tail(errp, tail, sizeof(tail));
			set_err(f->err, "fio %s: %s", why, tail);
		}
	}
	for (size_t i = nfixed; i < na; i++)
		free((void *)argv[i]);
	free(argv);
	if (f->err[0])
		goto stop;
	fp = fopen(out, "re");
	if (!fp || fseek(fp, 0, SEEK_END) < 0 || (sz = ftell(fp)) <= 0 ||
	    fseek(fp, 0, SEEK_SET) < 0 || !(buf = calloc(1, (size_t)sz + 1)) ||
	    fread(buf, 1, (size_t)sz, fp) != (size_t)sz) {
		set_err(f->err, "%s: cannot read fio's output", out);
		if (fp)
			fclose(fp);
		goto stop;
	}
	fclose(fp);
	p = strstr(buf, "\"jobs\"");
	p = p ? (char *)json_after(p, "error", &err) : NULL;
	p = p ? strstr(p, "\"write\"") : NULL;
	p = p ? (char *)json_after(p, "iops", &iops) : NULL;
	p = p ? strstr(p, "\"lat_ns\"") : NULL;
	p = p ? (char *)json_after(p, "mean", &mean) : NULL;
	if (!p) {
		set_err(f->err, "fio's JSON lacks jobs[0].error/write.iops/write.lat_ns.mean");
	} else if (err != 0) {
		set_err(f->err, "fio reported error %.0f", err);
	} else if (!(iops > 0)) {
		set_err(f->err, "fio reported no IOPS");
	} else {
		f->iops = iops;
		f->lat_mean_ms = mean / 1e6;
		f->ok = true;
	}
	free(buf);
stop:
	kill(tierd, SIGTERM);
	st = wait_deadline(tierd, 60, &late);
	g_tierd = -1;
	if (late || st != 0) {
		describe_status(why, sizeof(why), st);
		set_err(f->err, "tierd %s after SIGTERM", late ? "did not exit (killed)" : why);
		f->ok = false;
	}
	rm_tree(dir);
	g_dir[0] = '\0';
}

/* ---- output ---- */

static void row_head(const char *name)
{
	printf("%-30s", name);
}

static void cell(const char *s)
{
	printf(" %10s", s);
}

static void cellf(double v, int prec)
{
	char b[32];

	if (isnan(v))
		snprintf(b, sizeof(b), "-");
	else
		snprintf(b, sizeof(b), "%.*f", prec, v);
	cell(b);
}

static void print_task(const struct sopts *o, const struct task *t)
{
	static const enum col shown[] = { C_IOPS, C_MEAN, C_P99, C_PROMO, C_PROXW, C_FLUSH,
					  C_EVICT, C_HIT, C_PROMO_B, C_BASE_B, C_CACHE_B };
	static const char *const names[] = {
		[C_IOPS] = "IOPS", [C_MEAN] = "latency ms (mean)", [C_P99] = "latency ms (p99)",
	};
	const struct seed_ref *s = t->v->seed;

	printf("\n== seed004 %s, base_profile %s: %s\n", t->v->name, t->profile, t->v->what);
	printf("   %u images x %" PRIu64 " MiB, target_max_bytes %" PRIu64
	       " MiB, 4k randwrite zipf:1.1, %g s per QD after %g s ramp\n   [tier] ",
	       o->images, o->image_size >> 20, o->target >> 20, o->runtime, o->ramp);
	for (const char *c = t->v->tier; *c; c++)
		if (*c == '\n')
			fputs(c[1] ? "; " : "", stdout);
		else
			putchar(*c);
	printf("%s\n", t->v->tier[0] ? "" : "(nothing but target_max_bytes)");
	if (!t->started) {
		printf("   FAILED: %s\n", t->err);
		return;
	}
	row_head("QD (per job)");
	for (size_t i = 0; i < t->nqd; i++)
		cellf(t->qds[i], 0);
	printf("\n");
	row_head("requests outstanding");
	for (size_t i = 0; i < t->nqd; i++)
		cellf((double)t->qds[i] * o->images, 0);
	printf("\n");
	for (size_t k = 0; k < sizeof(shown) / sizeof(shown[0]); k++) {
		enum col c = shown[k];
		row_head(c < sizeof(names) / sizeof(names[0]) && names[c] ? names[c] : cols[c].row);
		for (size_t i = 0; i < t->nqd; i++) {
			if (i >= t->nruns)
				cell("FAILED");
			else if (!t->run_ok[i])
				cell("FAILED");
			else
				cellf(col_value(&t->runs[i], c), cols[c].prec);
		}
		printf("\n");
		if (c == C_P99 && s) {
			row_head(seed_no_proxy.what == s->what ? "seed IOPS (no proxy write)"
							       : "seed IOPS (proxy write)");
			for (size_t i = 0; i < t->nqd; i++) {
				int j = seed_index(s, t->qds[i]);
				cellf(j < 0 ? (double)NAN : s->iops[j], 0);
			}
			printf("\n");
			row_head("seed latency ms");
			for (size_t i = 0; i < t->nqd; i++) {
				int j = seed_index(s, t->qds[i]);
				cellf(j < 0 ? (double)NAN : s->lat_ms[j], 2);
			}
			printf("\n");
			row_head("IOPS / seed IOPS");
			for (size_t i = 0; i < t->nqd; i++) {
				int j = seed_index(s, t->qds[i]);
				const struct run *r = task_run(t, t->qds[i]);
				cellf(j < 0 || !r ? (double)NAN : col_value(r, C_IOPS) / s->iops[j], 2);
			}
			printf("\n");
		}
		if (c == C_P99) {
			row_head("job IOPS min / max");
			for (size_t i = 0; i < t->nqd; i++) {
				const struct run *r = task_run(t, t->qds[i]);
				char b[40];
				if (!r)
					snprintf(b, sizeof(b), "-");
				else
					snprintf(b, sizeof(b), "%.0f/%.0f",
						 (double)r->job_ops_min / r->secs,
						 (double)r->job_ops_max / r->secs);
				cell(b);
			}
			printf("\n");
			row_head("CPU cores tier-bench / tierd");
			for (size_t i = 0; i < t->nqd; i++) {
				const struct run *r = task_run(t, t->qds[i]);
				char b[40];
				if (!r || r->wall_s <= 0)
					snprintf(b, sizeof(b), "-");
				else if (r->server_cpu_s < 0)
					snprintf(b, sizeof(b), "%.2f/-", r->cpu_s / r->wall_s);
				else
					snprintf(b, sizeof(b), "%.2f/%.2f", r->cpu_s / r->wall_s,
						 r->server_cpu_s / r->wall_s);
				cell(b);
			}
			printf("\n");
		}
	}
	if (!t->ok)
		printf("   FAILED: %s\n", t->err);
}

/* ---- goals ---- */
struct goal {
	const char *vs;          /* variant compared with defaults */
	double want;             /* defaults IOPS >= want x theirs */
};

static const struct goal goals[] = { { "promote-always", 10 }, { "base", 5 }, { "ssd", 0.8 } };
#define NGOALS (sizeof(goals) / sizeof(goals[0]))

static const struct task *find_task(const struct task *ts, size_t n, const char *var,
				    const char *profile)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(ts[i].v->name, var) && (ts[i].v->profile || !strcmp(ts[i].profile, profile)))
			return &ts[i];
	return NULL;
}

/* defaults' IOPS over the other's at qd; NAN with *why when it cannot be had. */
static double goal_ratio(const struct task *ts, size_t n, const struct goal *g,
			 const char *profile, unsigned qd, const char **why)
{
	const struct task *d = find_task(ts, n, "defaults", profile);
	const struct task *x = find_task(ts, n, g->vs, profile);
	const struct run *rd = task_run(d, qd), *rx = task_run(x, qd);

	*why = NULL;
	if (!d || !x)
		*why = "not run";
	else if (!rd || !rx)
		*why = "failed";
	if (*why)
		return (double)NAN;
	return col_value(rd, C_IOPS) / col_value(rx, C_IOPS);
}

static void print_goals(const struct sopts *o, const struct task *ts, size_t n)
{
	if (!variant_find("defaults") || !find_task(ts, n, "defaults", o->profiles[0]))
		return;
	for (size_t p = 0; p < o->nprof; p++) {
		printf("\n== seed004 goals, base_profile %s: defaults' IOPS / the other's\n",
		       o->profiles[p]);
		row_head("QD (per job)");
		for (size_t i = 0; i < o->nqd; i++)
			cellf(o->qds[i], 0);
		printf("\n");
		for (size_t g = 0; g < NGOALS; g++) {
			char name[64];
			snprintf(name, sizeof(name), "defaults / %s", goals[g].vs);
			row_head(name);
			for (size_t i = 0; i < o->nqd; i++) {
				const char *why;
				double v = goal_ratio(ts, n, &goals[g], o->profiles[p], o->qds[i], &why);
				if (why)
					cell(why);
				else
					cellf(v, 2);
			}
			printf("\n");
			snprintf(name, sizeof(name), "  goal >= %gx", goals[g].want);
			row_head(name);
			for (size_t i = 0; i < o->nqd; i++) {
				const char *why;
				double v = goal_ratio(ts, n, &goals[g], o->profiles[p], o->qds[i], &why);
				cell(why ? "n/a" : v >= goals[g].want ? "met" : "not met");
			}
			printf("\n");
		}
	}
}

static double fio_ratio(const struct fio_res *f)
{
	const struct run *r = task_run(&f->tb, f->qd);

	return f->ok && r ? col_value(r, C_IOPS) / f->iops : (double)NAN;
}

static void print_fio(const struct sopts *o, const struct fio_res *f)
{
	const struct run *r = task_run(&f->tb, f->qd);
	double q = fio_ratio(f);

	printf("\n== fio check: %s, base_profile %s, QD %u per job (%u outstanding), "
	       "%g s after %g s ramp, a fresh tierd for each\n", f->v->name, f->profile, f->qd,
	       f->qd * o->images, o->runtime, o->ramp);
	row_head("");
	cell("tier-bench");
	cell("fio");
	printf("\n");
	row_head("IOPS");
	if (r)
		cellf(col_value(r, C_IOPS), 0);
	else
		cell("FAILED");
	if (f->ok)
		cellf(f->iops, 0);
	else
		cell("FAILED");
	printf("\n");
	row_head("latency ms (mean)");
	if (r)
		cellf(r->lat_mean / 1e3, 2);
	else
		cell("FAILED");
	if (f->ok)
		cellf(f->lat_mean_ms, 2);
	else
		cell("FAILED");
	printf("\n");
	row_head("client CPU (cores)");
	cellf(r && r->wall_s > 0 ? r->cpu_s / r->wall_s : (double)NAN, 2);
	cellf(f->ok && f->wall_s > 0 ? f->cpu_s / f->wall_s : (double)NAN, 2);
	printf("\n");
	row_head("tierd CPU (cores)");
	cellf(r && r->wall_s > 0 && r->server_cpu_s >= 0 ? r->server_cpu_s / r->wall_s : (double)NAN, 2);
	cellf(f->ok && f->wall_s > 0 && f->tierd_cpu_s >= 0 ? f->tierd_cpu_s / f->wall_s : (double)NAN, 2);
	printf("\n");
	if (!isnan(q))
		printf("   tier-bench / fio IOPS: %.3f (goal: within 15%%): %s\n", q,
		       fabs(q - 1) <= 0.15 ? "met" : "not met");
	if (!f->tb.ok)
		printf("   tier-bench FAILED: %s\n", f->tb.err);
	if (!f->ok)
		printf("   fio FAILED: %s\n", f->err);
}

static void csv_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

#define CSV_HEAD "kind,variant,base_profile,qd,outstanding,ok,error,ops,seconds,write_ops," \
		 "client_bytes,io_errors,job_iops_min,job_iops_max,client_cpu_cores,tierd_cpu_cores"

static void csv_run(FILE *f, const char *kind, const struct task *t, size_t i, unsigned images)
{
	const struct run *r = i < t->nruns ? &t->runs[i] : NULL;
	bool ok = r && t->run_ok[i];

	fprintf(f, "%s,%s,%s,%u,%u,%d,", kind, t->v->name, t->profile, t->qds[i],
		t->qds[i] * images, ok);
	csv_str(f, ok ? "" : r ? t->run_err[i] : t->err);
	if (ok) {
		fprintf(f, ",%" PRIu64 ",%.3f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.1f,%.1f,", r->ops,
			r->secs, r->wr_ops, r->bytes, r->io_errors,
			(double)r->job_ops_min / r->secs, (double)r->job_ops_max / r->secs);
		print_num(f, r->wall_s > 0 ? r->cpu_s / r->wall_s : (double)NAN, 3, false);
		fputc(',', f);
		print_num(f, r->wall_s > 0 && r->server_cpu_s >= 0 ? r->server_cpu_s / r->wall_s
			  : (double)NAN, 3, false);
	} else {
		fprintf(f, ",,,,,,,,,");
	}
	for (int k = 0; k < C_NCOL; k++) {
		fputc(',', f);
		if (ok)
			print_num(f, col_value(r, (enum col)k), cols[k].prec + 2, false);
	}
	{
		int j = seed_index(t->v->seed, t->qds[i]);
		if (j >= 0)
			fprintf(f, ",%.0f,%.2f", t->v->seed->iops[j], t->v->seed->lat_ms[j]);
		else
			fprintf(f, ",,");
	}
	fprintf(f, ",,,\n");
}

static void write_csv(const struct sopts *o, const struct task *ts, size_t n,
		      const struct fio_res *fr)
{
	FILE *f = open_out(o->csv);

	fprintf(f, CSV_HEAD);
	for (int k = 0; k < C_NCOL; k++)
		fprintf(f, ",%s", cols[k].csv);
	fprintf(f, ",seed_iops,seed_lat_ms,value,goal,met\n");
	for (size_t t = 0; t < n; t++)
		for (size_t i = 0; i < ts[t].nqd; i++)
			csv_run(f, "run", &ts[t], i, o->images);
	for (size_t p = 0; find_task(ts, n, "defaults", o->profiles[0]) && p < o->nprof; p++)
		for (size_t g = 0; g < NGOALS; g++)
			for (size_t i = 0; i < o->nqd; i++) {
				const char *why;
				double v = goal_ratio(ts, n, &goals[g], o->profiles[p], o->qds[i], &why);
				fprintf(f, "ratio,defaults/%s,%s,%u,%u,%d,", goals[g].vs, o->profiles[p],
					o->qds[i], o->qds[i] * o->images, !why);
				csv_str(f, why ? why : "");
				fprintf(f, ",,,,,,,,,");
				for (int k = 0; k < C_NCOL; k++)
					fputc(',', f);
				fprintf(f, ",,,");
				print_num(f, v, 4, false);
				fprintf(f, ",%g,%s\n", goals[g].want, why ? "" : v >= goals[g].want ? "1" : "0");
			}
	if (fr->ran) {
		double q = fio_ratio(fr);
		for (size_t i = 0; i < fr->tb.nqd; i++)
			csv_run(f, "fio_check_tier_bench", &fr->tb, i, o->images);
		fprintf(f, "fio_check_fio,%s,%s,%u,%u,%d,", fr->v->name, fr->profile, fr->qd,
			fr->qd * o->images, fr->ok);
		csv_str(f, fr->err);
		fprintf(f, ",,,,,,,,");
		print_num(f, fr->ok && fr->wall_s > 0 ? fr->cpu_s / fr->wall_s : (double)NAN, 3, false);
		fputc(',', f);
		print_num(f, fr->ok && fr->wall_s > 0 && fr->tierd_cpu_s >= 0 ?
			  fr->tierd_cpu_s / fr->wall_s : (double)NAN, 3, false);
		for (int k = 0; k < C_NCOL; k++) {
			fputc(',', f);
			if (fr->ok && k == C_IOPS)
				fprintf(f, "%.2f", fr->iops);
			if (fr->ok && k == C_MEAN)
				fprintf(f, "%.4f", fr->lat_mean_ms);
		}
		fprintf(f, ",,,");
		print_num(f, q, 4, false);
		fprintf(f, ",0.15,%s\n", isnan(q) ? "" : fabs(q - 1) <= 0.15 ? "1" : "0");
	}
	close_out(f, o->csv);
}

static void json_run(FILE *f, const struct task *t, size_t i, unsigned images)
{
	const struct run *r = i < t->nruns ? &t->runs[i] : NULL;
	bool ok = r && t->run_ok[i];
	int j = seed_index(t->v->seed, t->qds[i]);

	fprintf(f, "{\"qd\":%u,\"outstanding\":%u,\"ok\":%s,\"error\":", t->qds[i],
		t->qds[i] * images, ok ? "true" : "false");
	if (ok)
		fputs("null", f);
	else
		json_str(f, r ? t->run_err[i] : t->err[0] ? t->err : "no result");
	if (j >= 0)
		fprintf(f, ",\"seed_iops\":%.0f,\"seed_lat_ms\":%.2f", t->v->seed->iops[j],
			t->v->seed->lat_ms[j]);
	if (!ok) {
		fputs(",\"iops\":null}", f);
		return;
	}
	fprintf(f, ",\"jobs\":%u,\"ops\":%" PRIu64 ",\"seconds\":%.3f,\"write_ops\":%" PRIu64
		",\"read_ops\":%" PRIu64 ",\"client_bytes\":%" PRIu64 ",\"io_errors\":%" PRIu64
		",\"job_iops_min\":%.1f,\"job_iops_max\":%.1f,\"run_wall_s\":%.3f,\"client_cpu_s\":%.3f"
		",\"tierd_cpu_s\":", r->njobs, r->ops, r->secs,
		r->wr_ops, r->rd_ops, r->bytes, r->io_errors, (double)r->job_ops_min / r->secs,
		(double)r->job_ops_max / r->secs, r->wall_s, r->cpu_s);
	print_num(f, r->server_cpu_s >= 0 ? r->server_cpu_s : (double)NAN, 3, true);
	json_run_columns(f, r);
	fputc('}', f);
}

static void json_task(FILE *f, const struct task *t, unsigned images)
{
	fprintf(f, "{\"variant\":");
	json_str(f, t->v->name);
	fprintf(f, ",\"base_profile\":");
	json_str(f, t->profile);
	fprintf(f, ",\"cache_profile\":\"ssd\",\"tier_config\":");
	json_str(f, t->v->tier);
	fprintf(f, ",\"ok\":%s,\"started\":%s,\"error\":", t->ok ? "true" : "false",
		t->started ? "true" : "false");
	if (t->err[0])
		json_str(f, t->err);
	else
		fputs("null", f);
	fprintf(f, ",\"startup_s\":%.3f,\"wall_s\":%.3f,\"runs\":[", t->start_s, t->wall_s);
	for (size_t i = 0; t->started && i < t->nqd; i++) {
		if (i)
			fputc(',', f);
		json_run(f, t, i, images);
	}
	fputs("]}", f);
}

static void write_json(const struct sopts *o, const struct task *ts, size_t n,
		       const struct fio_res *fr, double wall)
{
	FILE *f = open_out(o->json);

	fprintf(f, "{\"tool\":\"tier-bench\",\"scenario\":\"seed004\",\"tierd\":");
	json_str(f, o->tierd);
	fprintf(f, ",\"images\":%u,\"image_size\":%" PRIu64 ",\"target_max_bytes\":%" PRIu64
		",\"bs\":4096,\"rw\":\"write\",\"workload\":\"zipf:1.1\",\"seed\":%u"
		",\"runtime_s\":%g,\"ramp_s\":%g,\"wall_s\":%.1f,\"qd\":[", o->images,
		o->image_size, o->target, o->seed, o->runtime, o->ramp, wall);
	for (size_t i = 0; i < o->nqd; i++)
		fprintf(f, "%s%u", i ? "," : "", o->qds[i]);
	fprintf(f, "],\"variants\":[");
	for (size_t t = 0; t < n; t++) {
		if (t)
			fputc(',', f);
		json_task(f, &ts[t], o->images);
	}
	fprintf(f, "],\"ratios\":[");
	for (size_t p = 0, first = 1; find_task(ts, n, "defaults", o->profiles[0]) && p < o->nprof; p++)
		for (size_t g = 0; g < NGOALS; g++)
			for (size_t i = 0; i < o->nqd; i++, first = 0) {
				const char *why;
				double v = goal_ratio(ts, n, &goals[g], o->profiles[p], o->qds[i], &why);
				fprintf(f, "%s{\"name\":\"defaults/%s\",\"base_profile\":", first ? "" : ",",
					goals[g].vs);
				json_str(f, o->profiles[p]);
				fprintf(f, ",\"qd\":%u,\"value\":", o->qds[i]);
				print_num(f, v, 4, true);
				fprintf(f, ",\"goal\":%g,\"met\":%s", goals[g].want,
					why ? "null" : v >= goals[g].want ? "true" : "false");
				if (why) {
					fprintf(f, ",\"error\":");
					json_str(f, why);
				}
				fputc('}', f);
			}
	fprintf(f, "],\"seed_published\":[");
	{
		const struct seed_ref *s[2] = { &seed_no_proxy, &seed_proxy };
		const char *var[2] = { "promote-always", "ceph" };
		for (int k = 0; k < 2; k++) {
			fprintf(f, "%s{\"what\":", k ? "," : "");
			json_str(f, s[k]->what);
			fprintf(f, ",\"compare_with\":\"%s\",\"runs\":[", var[k]);
			for (int i = 0; i < 5; i++)
				fprintf(f, "%s{\"qd\":%u,\"outstanding\":%u,\"iops\":%.0f,\"lat_ms\":%.2f}",
					i ? "," : "", s[k]->qd[i], s[k]->qd[i] * 20, s[k]->iops[i],
					s[k]->lat_ms[i]);
			fprintf(f, "]}");
		}
	}
	fprintf(f, "],\"fio_check\":");
	if (!fr->ran) {
		fputs("null", f);
	} else {
		double q = fio_ratio(fr);
		const struct run *r = task_run(&fr->tb, fr->qd);
		fprintf(f, "{\"variant\":");
		json_str(f, fr->v->name);
		fprintf(f, ",\"base_profile\":");
		json_str(f, fr->profile);
		fprintf(f, ",\"qd\":%u,\"outstanding\":%u,\"tier_bench_iops\":", fr->qd,
			fr->qd * o->images);
		print_num(f, r ? col_value(r, C_IOPS) : (double)NAN, 2, true);
		fprintf(f, ",\"tier_bench_lat_mean_ms\":");
		print_num(f, r ? r->lat_mean / 1e3 : (double)NAN, 4, true);
		fprintf(f, ",\"fio_iops\":");
		print_num(f, fr->ok ? fr->iops : (double)NAN, 2, true);
		fprintf(f, ",\"fio_lat_mean_ms\":");
		print_num(f, fr->ok ? fr->lat_mean_ms : (double)NAN, 4, true);
		fprintf(f, ",\"fio_wall_s\":%.3f,\"fio_cpu_s\":%.3f,\"fio_tierd_cpu_s\":", fr->wall_s,
			fr->cpu_s);
		print_num(f, fr->tierd_cpu_s >= 0 ? fr->tierd_cpu_s : (double)NAN, 3, true);
		fprintf(f, ",\"ratio\":");
		print_num(f, q, 4, true);
		fprintf(f, ",\"goal\":\"within 15%%\",\"met\":%s,\"tier_bench\":",
			isnan(q) ? "null" : fabs(q - 1) <= 0.15 ? "true" : "false");
		json_task(f, &fr->tb, o->images);
		fprintf(f, ",\"fio_error\":");
		if (fr->err[0])
			json_str(f, fr->err);
		else
			fputs("null", f);
		fputc('}', f);
	}
	fprintf(f, "}\n");
	close_out(f, o->json);
}

static void xml_str(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '<')
			fputs("&lt;", f);
		else if (*s == '>')
			fputs("&gt;", f);
		else if (*s == '&')
			fputs("&amp;", f);
		else
			fputc(*s, f);
	}
}

/* IOPS vs QD, log y (and log2 x), one line per task, the seed's numbers dashed. */
static void write_svg(const struct sopts *o, const struct task *ts, size_t n)
{
	static const char *const colors[] = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
		"#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f" };
	const struct seed_ref *refs[2] = { &seed_no_proxy, &seed_proxy };
	const double W = 760, H = 440, L = 70, R = 250, T = 40, B = 50;
	double pw = W - L - R, ph = H - T - B, lo = INFINITY, hi = 0, xlo, xhi;
	unsigned qmin = UINT32_MAX, qmax = 0;
	FILE *f = open_out(o->svg);
	int ylo, yhi;
	size_t nleg = 0;

	for (size_t i = 0; i < o->nqd; i++) {
		qmin = o->qds[i] < qmin ? o->qds[i] : qmin;
		qmax = o->qds[i] > qmax ? o->qds[i] : qmax;
	}
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < 5; i++) {
			qmin = refs[k]->qd[i] < qmin ? refs[k]->qd[i] : qmin;
			qmax = refs[k]->qd[i] > qmax ? refs[k]->qd[i] : qmax;
			lo = fmin(lo, refs[k]->iops[i]);
			hi = fmax(hi, refs[k]->iops[i]);
		}
	for (size_t t = 0; t < n; t++)
		for (size_t i = 0; i < ts[t].nqd; i++) {
			const struct run *r = task_run(&ts[t], ts[t].qds[i]);
			double v = r ? col_value(r, C_IOPS) : (double)NAN;
			if (!isnan(v) && v > 0) {
				lo = fmin(lo, v);
				hi = fmax(hi, v);
			}
		}
	ylo = (int)floor(log10(lo));
	yhi = (int)ceil(log10(hi));
	if (yhi <= ylo)
		yhi = ylo + 1;
	xlo = log2((double)qmin);
	xhi = log2((double)qmax);
	if (xhi <= xlo)
		xhi = xlo + 1;
#define XP(q) (L + (log2((double)(q)) - xlo) / (xhi - xlo) * pw)
#define YP(v) (T + ph - (log10(v) - ylo) / (double)(yhi - ylo) * ph)
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		"viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
		W, H, W, H);
	fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
	fprintf(f, "<text x=\"%.0f\" y=\"22\" font-size=\"14\">seed004: %u images x %" PRIu64
		" MiB, 4k randwrite zipf:1.1, target %" PRIu64 " MiB</text>\n", L, o->images,
		o->image_size >> 20, o->target >> 20);
	for (int e = ylo; e <= yhi; e++) {
		double y = YP(pow(10, e));
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
			"<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.0f</text>\n",
			L, y, L + pw, y, L - 6, y + 4, pow(10, e));
	}
	for (unsigned q = 1; q <= qmax; q *= 2) {
		if (q < qmin)
			continue;
		double x = XP(q);
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n"
			"<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%u</text>\n",
			x, T, x, T + ph, x, T + ph + 16, q);
		if (q > UINT32_MAX / 2)
			break;
	}
	fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
		"stroke=\"black\"/>\n", L, T, pw, ph);
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">queue depth per job "
		"(x %u jobs)</text>\n", L + pw / 2, H - 12, o->images);
	fprintf(f, "<text transform=\"translate(16 %.1f) rotate(-90)\" text-anchor=\"middle\">"
		"aggregate IOPS (log)</text>\n", T + ph / 2);
	for (size_t t = 0; t <= n + 1; t++) {
		const char *color, *dash = "";
		char label[128];
		bool any = false;
		double ly = T + 10 + 18 * (double)nleg;

		if (t < n) {
			color = colors[t % (sizeof(colors) / sizeof(colors[0]))];
			snprintf(label, sizeof(label), "%s / %s%s", ts[t].v->name, ts[t].profile,
				 ts[t].ok ? "" : " (FAILED)");
			fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
				color);
			for (size_t i = 0; i < ts[t].nqd; i++) {
				const struct run *r = task_run(&ts[t], ts[t].qds[i]);
				double v = r ? col_value(r, C_IOPS) : (double)NAN;
				if (!isnan(v) && v > 0) {
					fprintf(f, "%s%.1f,%.1f", any ? " " : "", XP(ts[t].qds[i]), YP(v));
					any = true;
				}
			}
			fprintf(f, "\"/>\n");
			for (size_t i = 0; i < ts[t].nqd; i++) {
				const struct run *r = task_run(&ts[t], ts[t].qds[i]);
				double v = r ? col_value(r, C_IOPS) : (double)NAN;
				if (!isnan(v) && v > 0)
					fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
						XP(ts[t].qds[i]), YP(v), color);
			}
		} else {
			const struct seed_ref *s = refs[t - n];
			color = t == n ? "#555" : "#000";
			dash = " stroke-dasharray=\"6 4\"";
			snprintf(label, sizeof(label), "%s", s->what);
			fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s points=\"",
				color, dash);
			for (int i = 0; i < 5; i++)
				fprintf(f, "%s%.1f,%.1f", i ? " " : "", XP(s->qd[i]), YP(s->iops[i]));
			fprintf(f, "\"/>\n");
		}
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
			"stroke-width=\"2\"%s/>\n<text x=\"%.1f\" y=\"%.1f\">", L + pw + 14, ly,
			L + pw + 40, ly, color, dash, L + pw + 46, ly + 4);
		xml_str(f, label);
		fprintf(f, "</text>\n");
		nleg++;
	}
#undef XP
#undef YP
	fprintf(f, "</svg>\n");
	close_out(f, o->svg);
}

/* ---- command line ---- */

static void usage(FILE *f)
{
	fputs("usage: tier-bench scenario seed004 [options]\n"
	      "  Seed 004's benchmark against tierd on the local backend: one job per image,\n"
	      "  4k random writes zipf:1.1, a fresh tierd per (variant, base profile).\n"
	      "  --tierd PATH        tierd binary (default: ../daemon/tierd next to tier-bench)\n"
	      "  --images N          images (= jobs, the seed's VMs; default 20)\n"
	      "  --image-size SIZE   per image (default 256M)\n"
	      "  --target SIZE       target_max_bytes (default images x size / 4)\n"
	      "  --qd LIST           queue depths per job (default 1,2,4,8,16)\n"
	      "  --runtime S         seconds per QD (default 10) after --ramp S (default 2)\n"
	      "  --variants LIST     of base,ssd,promote-always,ceph,defaults (default all)\n"
	      "  --base-profile LIST base pool device profiles (default hdd,hdd-journal)\n"
	      "  --seed N            generator seed of job 0; job i uses N + i (default 1)\n"
	      "  --csv FILE, --json FILE, --svg FILE   also write the results there\n"
	      "  --fio-check         also run `defaults` through fio (ioengine=nbd) and compare\n"
	      "  --fio-variant V     that variant instead of defaults (first --base-profile)\n"
	      "  --fio-qd N          its queue depth per job (default 4 if in --qd, else the first)\n"
	      "  --fio PATH          fio binary (default fio)\n"
	      "  Exit status: 0 every variant ran; 1 one failed (reported, never as a number).\n",
	      f);
}

static void sdie(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void sdie(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("tier-bench scenario: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

static char *default_tierd(void)
{
	char self[PATH_MAX], path[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0)
		sdie("cannot find my own path (/proc/self/exe): use --tierd");
	self[n] = '\0';
	snprintf(path, sizeof(path), "%s/../daemon/tierd", dirname(self));
	return realpath(path, NULL);
}

static void parse_list(const char *opt, const char *v, char **out, size_t max, size_t *n)
{
	char *dup = strdup(v), *save = NULL;

	if (!dup)
		sdie("out of memory");
	*n = 0;
	for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (*n == max)
			sdie("%s: at most %zu entries", opt, max);
		out[(*n)++] = strdup(t);
		if (!out[*n - 1])
			sdie("out of memory");
	}
	free(dup);
	if (!*n)
		sdie("%s: empty list", opt);
}

static void parse_sargs(struct sopts *o, int argc, char **argv)
{
	static const struct option lo[] = {
		{"tierd", 1, NULL, 'D'}, {"images", 1, NULL, 'i'}, {"image-size", 1, NULL, 'S'},
		{"target", 1, NULL, 'T'}, {"qd", 1, NULL, 'q'}, {"runtime", 1, NULL, 't'},
		{"ramp", 1, NULL, 'R'}, {"variants", 1, NULL, 'v'}, {"base-profile", 1, NULL, 'p'},
		{"seed", 1, NULL, 's'}, {"csv", 1, NULL, 'c'}, {"json", 1, NULL, 'j'},
		{"svg", 1, NULL, 'g'}, {"fio-check", 0, NULL, 'F'}, {"fio-qd", 1, NULL, 'Q'},
		{"fio", 1, NULL, 'f'}, {"fio-variant", 1, NULL, 'V'}, {"help", 0, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct cfg qc = { 0 };
	char *names[NVARIANTS * 2];
	size_t nn = 0;
	int op;

	*o = (struct sopts){ .fio = "fio", .images = 20, .image_size = 256ull << 20,
			     .runtime = 10, .ramp = 2, .seed = 1, .fio_var = variant_find("defaults") };
	parse_qds(&qc, "1,2,4,8,16");
	parse_list("--base-profile", "hdd,hdd-journal", o->profiles, 8, &o->nprof);
	for (size_t i = 0; i < NVARIANTS; i++)
		o->var[o->nvar++] = &variants[i];
	optind = 1;
	while ((op = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (op) {
		case 'D': o->tierd = optarg; break;
		case 'i': o->images = (unsigned)parse_num("--images", optarg, 1, MAX_IMAGES); break;
		case 'S': o->image_size = parse_size("--image-size", optarg); break;
		case 'T': o->target = parse_size("--target", optarg); break;
		case 'q': parse_qds(&qc, optarg); break;
		case 't': o->runtime = parse_num("--runtime", optarg, 0.01, 1e6); break;
		case 'R': o->ramp = parse_num("--ramp", optarg, 0, 1e6); break;
		case 'v':
			for (size_t i = 0; i < nn; i++)
				free(names[i]);
			parse_list("--variants", optarg, names, NVARIANTS * 2, &nn);
			o->nvar = 0;
			for (size_t i = 0; i < nn; i++) {
				const struct variant *v = variant_find(names[i]);
				if (!v)
					sdie("--variants: unknown '%s' (base, ssd, promote-always, ceph, "
					     "defaults)", names[i]);
				for (size_t k = 0; k < o->nvar; k++)
					if (o->var[k] == v)
						sdie("--variants: '%s' twice", names[i]);
				o->var[o->nvar++] = v;
			}
			break;
		case 'p':
			for (size_t i = 0; i < o->nprof; i++)
				free(o->profiles[i]);
			parse_list("--base-profile", optarg, o->profiles, 8, &o->nprof);
			break;
		case 's': o->seed = (uint32_t)parse_num("--seed", optarg, 0, 4294967295.0); break;
		case 'c': o->csv = optarg; break;
		case 'j': o->json = optarg; break;
		case 'g': o->svg = optarg; break;
		case 'F': o->fio_check = true; break;
		case 'Q': o->fio_qd = (unsigned)parse_num("--fio-qd", optarg, 1, MAX_QD); break;
		case 'f': o->fio = optarg; break;
		case 'V':
			o->fio_var = variant_find(optarg);
			if (!o->fio_var)
				sdie("--fio-variant: unknown '%s'", optarg);
			break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	for (size_t i = 0; i < nn; i++)
		free(names[i]);
	if (optind + 1 != argc) {
		usage(stderr);
		exit(2);
	}
	if (strcmp(argv[optind], "seed004"))
		sdie("unknown scenario '%s' (known: seed004)", argv[optind]);
	memcpy(o->qds, qc.qds, sizeof(o->qds));
	o->nqd = qc.nqd;
	if (o->image_size < (1u << 20) || o->image_size % 4096)
		sdie("--image-size: a multiple of 4k, at least 1M");
	if (!o->target)
		o->target = (uint64_t)o->images * o->image_size / 4;
	if (!o->fio_qd) {
		o->fio_qd = o->qds[0];
		for (size_t i = 0; i < o->nqd; i++)
			if (o->qds[i] == 4)
				o->fio_qd = 4;
	}
	for (size_t i = 0; i < o->nprof; i++)
		for (const char *c = o->profiles[i]; *c; c++)
			if (!(*c == '-' || *c == '_' || (*c >= 'a' && *c <= 'z') ||
			      (*c >= '0' && *c <= '9')))
				sdie("--base-profile: '%s' is not a profile name", o->profiles[i]);
	if (!o->tierd) {
		char *d = default_tierd();
		if (!d)
			sdie("no tierd at ../daemon/tierd next to tier-bench: use --tierd PATH");
		o->tierd = d;
	}
	if (access(o->tierd, X_OK) < 0)
		sdie("--tierd %s: %s", o->tierd, strerror(errno));
}

int scenario_main(int argc, char **argv)
{
	static struct sopts o;
	static struct task ts[MAX_TASKS];
	static struct fio_res fr;
	struct sigaction sa = { .sa_handler = on_signal };
	size_t n = 0, nfailed = 0;
	double t0 = mono_s(), wall;

	parse_sargs(&o, argc, argv);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	for (size_t v = 0; v < o.nvar; v++) {
		size_t np = o.var[v]->profile ? 1 : o.nprof;
		for (size_t p = 0; p < np; p++) {
			struct task *t = &ts[n++];
			if (n > MAX_TASKS)
				sdie("too many variants x profiles");
			t->v = o.var[v];
			t->profile = o.var[v]->profile ? o.var[v]->profile : o.profiles[p];
			t->nqd = o.nqd;
			memcpy(t->qds, o.qds, sizeof(t->qds));
		}
	}
	say("seed004: %zu tierd runs (%u images x %" PRIu64 " MiB, target %" PRIu64 " MiB, "
	    "QD %u..%u per job, %g s + %g s ramp each); tierd %s", n, o.images,
	    o.image_size >> 20, o.target >> 20, o.qds[0], o.qds[o.nqd - 1], o.runtime, o.ramp,
	    o.tierd);
	for (size_t i = 0; i < n; i++) {
		run_task(&o, &ts[i]);
		if (!ts[i].ok) {
			nfailed++;
			say("%s/%s: FAILED: %s", ts[i].v->name, ts[i].profile, ts[i].err);
		}
	}
	if (o.fio_check) {
		fr.qd = o.fio_qd;
		fr.v = o.fio_var;
		fr.profile = o.fio_var->profile ? o.fio_var->profile : o.profiles[0];
		fr.tb = (struct task){ .v = fr.v, .profile = fr.profile,
				       .nqd = 1, .qds = { o.fio_qd } };
		say("fio check: tier-bench at QD %u per job, fresh tierd", o.fio_qd);
		run_task(&o, &fr.tb);
		fio_check(&o, &fr);
		if (!fr.tb.ok || !fr.ok)
			nfailed++;
	}
	wall = mono_s() - t0;
	for (size_t i = 0; i < n; i++)
		print_task(&o, &ts[i]);
	print_goals(&o, ts, n);
	if (o.fio_check)
		print_fio(&o, &fr);
	printf("\nwall time %.0f s; %zu of %zu tierd runs failed\n", wall, nfailed,
	       n + (o.fio_check ? 1 : 0));
	fflush(stdout);
	if (o.csv)
		write_csv(&o, ts, n, &fr);
	if (o.json)
		write_json(&o, ts, n, &fr, wall);
	if (o.svg)
		write_svg(&o, ts, n);
	return nfailed ? 1 : 0;
}
