/* SPDX-License-Identifier: MIT */
/*
 * tierctl - the admin CLI: sends one command line to tierd's admin socket and
 * shows the JSON answer (read with jansson), as a human summary for
 * `status`, as indented JSON otherwise, and as a progress bar while
 * `flush|evict --wait` polls status.
 * It decides only presentation and exit codes (0 ok, 1 error answer or lost
 * daemon, 2 usage); it must never change anything tierd was not asked to.
 */
#include <config.h>   /* generated: TIER_VERSION */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_SOCKET "/run/tierd/tierd.asok"
#define ANSWER_TIMEOUT_MS 30000

struct conn {
	int fd;
	char *buf;
	size_t len, cap;
};

/* The answer being looked at (released on the way out). */
static json_t *held;

/* "tierctl: MESSAGE" on stderr, then exit with code (1 an error, 2 a bad command line). */
static void vdie(int code, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0), noreturn));
static void vdie(int code, const char *fmt, va_list ap)
{
	fprintf(stderr, "tierctl: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	json_decref(held);
	exit(code);
}

static void usage_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void usage_die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vdie(2, fmt, ap);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vdie(1, fmt, ap);
}

static int conn_open(struct conn *c, const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	memset(c, 0, sizeof(*c));
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -errno;
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int r = -errno;
		close(c->fd);
		return r;
	}
	return 0;
}

/* Sends line, returns the answer line (owned by c, valid until the next call). */
static char *conn_ask(struct conn *c, const char *line)
{
	size_t n = strlen(line), off = 0;
	char *nl;

	while (off < n) {
		ssize_t w = send(c->fd, line + off, n - off, MSG_NOSIGNAL);
		if (w < 0)
			die("send: %s", strerror(errno));
		off += (size_t)w;
	}
	if (send(c->fd, "\n", 1, MSG_NOSIGNAL) != 1)
		die("send: %s", strerror(errno));
	c->len = 0;
	for (;;) {
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		ssize_t r;
		if (c->cap - c->len < 4096) {
			c->cap = c->cap ? c->cap * 2 : 65536;
			c->buf = realloc(c->buf, c->cap);
			if (!c->buf)
				die("%s", "out of memory");
		}
		if (poll(&p, 1, ANSWER_TIMEOUT_MS) == 0)
			die("%s", "no answer from tierd within 30 s");
		r = recv(c->fd, c->buf + c->len, c->cap - c->len - 1, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die("%s", r == 0 ? "tierd closed the connection" : strerror(errno));
		c->len += (size_t)r;
		c->buf[c->len] = '\0';
		nl = memchr(c->buf, '\n', c->len);
		if (nl) {
			*nl = '\0';
			return c->buf;
		}
	}
}

/* ---- the answers, read with jansson ---- */

/* The answer line as JSON; dies on anything that is not a JSON object. */
static json_t *parse_answer(const char *line)
{
	json_error_t err;
	json_t *j = json_loads(line, 0, &err);

	if (!json_is_object(j)) {
		json_decref(j);
		die("unexpected answer from tierd (%s): %.200s", j ? "not an object" : err.text, line);
	}
	return j;
}

/* "a.b.c" path lookup; NULL when absent. */
static json_t *jget(json_t *j, const char *path)
{
	char key[128];

	while (j && *path) {
		const char *dot = strchr(path, '.');
		size_t n = dot ? (size_t)(dot - path) : strlen(path);
		if (n >= sizeof(key))
			return NULL;
		memcpy(key, path, n);
		key[n] = '\0';
		j = json_object_get(j, key);
		path += n + (dot ? 1 : 0);
	}
	return j;
}

static double jnum(json_t *j, const char *path)
{
	json_t *v = jget(j, path);

	return json_is_number(v) ? json_number_value(v) : (double)NAN;
}

static const char *jstr(json_t *j, const char *path)
{
	return json_string_value(jget(j, path));
}

static void pretty(json_t *j)
{
	char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));

	if (!s)
		die("%s", "out of memory");
	puts(s);
	free(s);
}

/* ---- presentation ---- */

static const char *human(double b, char *out, size_t len)
{
	static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	int i = 0;

	if (isnan(b))
		return "n/a";
	while (b >= 1024 && i < 5) {
		b /= 1024;
		i++;
	}
	snprintf(out, len, i ? "%.1f %s" : "%.0f %s", b, u[i]);
	return out;
}

static const char *pct(double r, char *out, size_t len)
{
	if (isnan(r))
		return "n/a";
	snprintf(out, len, "%.1f%%", r * 100);
	return out;
}

static const char *lat(double us, char *out, size_t len)
{
	if (isnan(us))
		return "n/a";
	if (us >= 10000)
		snprintf(out, len, "%.0fms", us / 1000);
	else if (us >= 1000)
		snprintf(out, len, "%.1fms", us / 1000);
	else
		snprintf(out, len, "%.0fus", us);
	return out;
}

static void print_status(json_t *j)
{
	char a[32], b[32], c[32];
	const char *s1, *s2;

#define N(k) jnum(j, k)
	s1 = jstr(j, "cache_mode");
	printf("tierd: %.0f image(s), cache_mode %s\n", N("images"), s1 ? s1 : "?");
	printf("  hit ratio     read %s, write %s\n", pct(N("read_hit_ratio"), a, sizeof(a)),
	       pct(N("write_hit_ratio"), b, sizeof(b)));
	printf("  cache         %s in %.0f objects, target %s, full %s\n",
	       human(N("cached_bytes"), a, sizeof(a)), N("cached_objects"),
	       human(N("target_max_bytes"), b, sizeof(b)), pct(N("full_ratio"), c, sizeof(c)));
	printf("  dirty         %s in %.0f objects, dirty %s\n",
	       human(N("dirty_bytes"), a, sizeof(a)), N("dirty_objects"),
	       pct(N("dirty_ratio"), b, sizeof(b)));
	s1 = jstr(j, "flush_mode");
	s2 = jstr(j, "evict_mode");
	printf("  agent         flush %s, evict %s (effort %.0f%%), %.0f ops in flight%s\n",
	       s1 ? s1 : "?", s2 ? s2 : "?", N("evict_effort_pct"), N("agent_ops_in_flight"),
	       N("agent_turnover") == 1 ? ", turning over after a phase change" : "");
	printf("  promotions    %.0f (%s), throttled %.0f, failed %.0f\n", N("promotions"),
	       human(N("promote_bytes"), a, sizeof(a)), N("promote_throttled"),
	       N("promote_failed"));
	printf("  proxy         reads %.0f (%s), writes %.0f (%s)\n", N("proxy_reads"),
	       human(N("proxy_read_bytes"), a, sizeof(a)), N("proxy_writes"),
	       human(N("proxy_write_bytes"), b, sizeof(b)));
	printf("  flush/evict   flushed %.0f (%s), evicted %.0f (%s), failed %.0f/%.0f\n",
	       N("flushes"), human(N("flush_bytes"), a, sizeof(a)), N("evictions"),
	       human(N("evict_bytes"), b, sizeof(b)), N("flush_failed"), N("evict_failed"));
	printf("  ops           read %.0f, write %.0f, trim %.0f, write_zeroes %.0f, flush %.0f, cache %.0f\n",
	       N("ops.read"), N("ops.write"), N("ops.trim"), N("ops.write_zeroes"),
	       N("ops.flush"), N("ops.cache"));
	if (!isnan(N("throughput.window_s")))
		printf("  throughput    read %.0f IOPS %s/s, write %.0f IOPS %s/s (last %.0f s)\n",
		       N("throughput.read_iops"), human(N("throughput.read_bytes_sec"), a, sizeof(a)),
		       N("throughput.write_iops"),
		       human(N("throughput.write_bytes_sec"), b, sizeof(b)), N("throughput.window_s"));
	printf("  latency read  p50 %s, p99 %s, p999 %s\n", lat(N("latency_us.read.p50"), a, sizeof(a)),
	       lat(N("latency_us.read.p99"), b, sizeof(b)), lat(N("latency_us.read.p999"), c, sizeof(c)));
	printf("  latency write p50 %s, p99 %s, p999 %s\n", lat(N("latency_us.write.p50"), a, sizeof(a)),
	       lat(N("latency_us.write.p99"), b, sizeof(b)), lat(N("latency_us.write.p999"), c, sizeof(c)));
	printf("  in flight     %.0f requests, errors %.0f\n", N("requests_in_flight"), N("errors"));
#undef N
}

/*
 * The answer to line (replacing and releasing the one held before); dies
 * with the daemon's message when it is an error.
 */
static json_t *ask(struct conn *c, const char *line)
{
	json_t *err;

	json_decref(held);
	held = NULL;
	held = parse_answer(conn_ask(c, line));
	err = json_object_get(held, "error");
	if (err)
		die("%s", json_is_string(err) ? json_string_value(err) : "error answer");
	return held;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void show_progress(const char *what, double left, double total, bool tty, double *last)
{
	double done = total > 0 ? 1.0 - left / total : 1.0;
	char h[32];

	if (done < 0)
		done = 0;
	if (tty) {
		int w = 30, fill = (int)(done * w + 0.5);
		printf("\r%s [%.*s%*s] %3.0f%%  %s left   ", what,
		       fill, "##############################", w - fill, "", done * 100,
		       human(left, h, sizeof(h)));
		fflush(stdout);
	} else if (now_s() - *last >= 1.0 || left == 0) {
		printf("%s: %s left (%.0f%% done)\n", what, human(left, h, sizeof(h)), done * 100);
		fflush(stdout);
		*last = now_s();
	}
}

/* flush|evict [--image I] [--wait] [--timeout S] */
static int flush_evict(struct conn *c, int argc, char **argv)
{
	const char *what = argv[0], *image = NULL;
	const char *key = strcmp(what, "flush") == 0 ? "dirty_bytes" : "cached_bytes";
	bool wait = false, tty = isatty(STDOUT_FILENO);
	double timeout = 0, total, left, start, last = 0, fails, fails0 = NAN, left_last = INFINITY;
	char line[512];

	static const struct option opts[] = {
		{ "wait", no_argument, NULL, 'w' },
		{ "image", required_argument, NULL, 'i' },
		{ "timeout", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	int o;
	char *end;

	optind = 0;   /* GNU: start over, on the subcommand's arguments */
	while ((o = getopt_long(argc, argv, "+wi:t:", opts, NULL)) != -1) {
		switch (o) {
		case 'w': wait = true; break;
		case 'i': image = optarg; break;
		case 't':
			timeout = strtod(optarg, &end);
			if (end == optarg || *end || timeout < 0)
				usage_die("%s: --timeout takes seconds, not '%s'", what, optarg);
			break;
		default:
			usage_die("usage: tierctl %s [--image=NAME] [--wait [--timeout=SECONDS]]", what);
		}
	}
	if (optind != argc)
		usage_die("usage: tierctl %s [--image=NAME] [--wait [--timeout=SECONDS]]", what);
	snprintf(line, sizeof(line), "%s%s%s", what, image ? " --image " : "", image ? image : "");
	json_t *ans = ask(c, line);
	if (!wait) {
		pretty(ans);
		return 0;
	}
	total = jnum(ans, key);
	start = now_s();
	for (;;) {
		ans = ask(c, "status");
		left = jnum(ans, key);
		if (isnan(left))
			die("status lacks %s", key);
		/*
		 * Fail fast when the agent's flushes (or evictions) keep failing
		 * with nothing moving: waiting cannot help until the pool is fixed.
		 */
		fails = jnum(ans, "flush_failed") + (key[0] == 'c' ? jnum(ans, "evict_failed") : 0);
		if (isnan(fails0) || left < left_last) {
			fails0 = fails;
			left_last = left;
		} else if (fails - fails0 >= 3) {
			if (tty)
				putchar('\n');
			die("%s is failing: %.0f failed flush/evict attempts while %.0f bytes stay %s "
			    "(tierd's log names the object and the error); not waiting", what,
			    fails - fails0, left, key[0] == 'd' ? "dirty" : "cached");
		}
		if (left > total)
			total = left;
		show_progress(what, left, total, tty, &last);
		if (left == 0)
			break;
		if (timeout > 0 && now_s() - start > timeout) {
			if (tty)
				putchar('\n');
			die("timed out, %s still above zero", key);
		}
		usleep(250000);
	}
	if (tty)
		putchar('\n');
	printf("%s: done in %.1f s\n", what, now_s() - start);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tierctl [--socket=PATH] COMMAND...\n"
		"  -s, --socket=PATH             the admin socket (default below, or\n"
		"                                $TIERD_ADMIN_SOCKET)\n"
		"  -V, --version, -h, --help\n"
		"  status                        human summary\n"
		"  perf dump [LOGGER [COUNTER]]  the counters, in Ceph's perf layout (JSON)\n"
		"  perf schema                   their types and descriptions\n"
		"  config show | get KEY | set KEY VALUE\n"
		"  reload                        re-read the config file (as SIGHUP)\n"
		"  flush [--image I] [--wait]    write dirty objects to the base pool\n"
		"  evict [--image I] [--wait]    flush and drop cached objects\n"
		"  promote IMAGE OFFSET LENGTH   pull a range into the cache\n"
		"  hitset dump | images | version | help\n"
		"default socket: %s\n"
		"exit status: 0 done; 1 tierd answered with an error, could not be\n"
		"reached or went away, or --wait timed out; 2 a bad command line\n",
		DEFAULT_SOCKET);
}

int main(int argc, char **argv)
{
	const char *path = getenv("TIERD_ADMIN_SOCKET");
	char line[4096];
	struct conn c;
	size_t n = 0;
	int i = 1, r;

	if (!path || !*path)
		path = DEFAULT_SOCKET;
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int o;

	/* "+": options end at the command (flush takes its own) */
	while ((o = getopt_long(argc, argv, "+s:Vh", opts, NULL)) != -1) {
		switch (o) {
		case 's': path = optarg; break;
		case 'V': printf("tierctl %s\n", TIER_VERSION); return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	i = optind;
	if (i == argc) {
		usage(stderr);
		return 2;
	}
	r = conn_open(&c, path);
	if (r < 0) {
		fprintf(stderr, "tierctl: cannot connect to %s: %s (is tierd running?)\n", path,
			strerror(-r));
		return 1;
	}
	if (!strcmp(argv[i], "flush") || !strcmp(argv[i], "evict")) {
		r = flush_evict(&c, argc - i, argv + i);
		json_decref(held);
		close(c.fd);
		free(c.buf);
		return r;
	}
	line[0] = '\0';
	for (int k = i; k < argc; k++) {
		if (strchr(argv[k], '\n') || n + strlen(argv[k]) + 2 > sizeof(line)) {
			fprintf(stderr, "tierctl: bad or too long command\n");
			return 2;
		}
		n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%s", k > i ? " " : "", argv[k]);
	}
	json_t *ans = ask(&c, line);
	if (!strcmp(argv[i], "status") && argc - i == 1)
		print_status(ans);
	else
		pretty(ans);
	json_decref(held);
	close(c.fd);
	free(c.buf);
	return 0;
}
