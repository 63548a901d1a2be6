/* SPDX-License-Identifier: MIT */
/*
 * config.c - tierd's INI configuration file.  It decides which sections and
 * keys exist, their defaults, units and ranges, and the rules that tie keys
 * together (images need a size on the local backend, an RBD image on rados).
 * A load builds a fresh struct or fails with "FILE:LINE: [section] key:
 * message (allowed: ...)"; it must never half-apply a file, touch a running
 * engine, or print (the daemon decides where the message goes).
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "daemon/config.h"
#include "tier/engine.h"

#define UNSET UINT64_MAX
#define SUN_PATH_MAX 107   /* sizeof(sun_path) - 1 */

/* [local] device-model overrides, applied on top of the profile at the end. */
struct model_ovr {
	char *profile;
	uint64_t lat, read_lat, write_lat, bw, qd;
};

struct seen_key {
	char *section, *key;
	int line;
};

struct parse_ctx {
	const char *path;
	struct tierd_config *c;
	FILE *f;
	int line;
	int err_line;            /* line of the first error, 0 = none */
	int rc;                  /* first error, 0 = none */
	char *err;
	size_t errlen;
	bool listen_from_file;
	struct model_ovr ovr[2];  /* base, cache */
	int tier_line;
	int image_line[TIERD_MAX_IMAGES];
	struct seen_key *seen;
	size_t n_seen;
	char *preset;            /* [tier] tier_preset, applied under the explicit keys */
	int preset_line;
};

enum ktype {
	T_STR,       /* non-empty string */
	T_STR_OPT,   /* string, empty = NULL */
	T_SOCK,      /* unix socket path */
	T_BACKEND, T_LOGLEVEL, T_PROFILE,
	T_LISTEN,    /* appended, comma-separated */
	T_ADDR_OPT,  /* host:port, off/none/empty = NULL */
	T_CLIENT,    /* ceph entity name, "client." added when missing */
	T_U32, T_U64, T_BYTES, T_MS, T_BOOL,
	T_TLS,       /* off | on | require */
	T_MODE,      /* octal file mode */
	T_HANDOFF,   /* on_request | never */
};

enum kbase { B_CFG, B_BASE_OVR, B_CACHE_OVR, B_IMG };

struct kdesc {
	const char *name;
	enum ktype t;
	enum kbase base;
	size_t off;
	uint64_t lo, hi;
};

#define CFG(n, t, f, lo, hi) {n, t, B_CFG, offsetof(struct tierd_config, f), lo, hi}
#define OVR(n, t, b, f, lo, hi) {n, t, b, offsetof(struct model_ovr, f), lo, hi}
#define IMG(n, t, f, lo, hi) {n, t, B_IMG, offsetof(struct tierd_image_cfg, f), lo, hi}
#define LAT_MAX 10000000ull   /* 10 s in us */

static const struct kdesc global_keys[] = {
	CFG("backend", T_BACKEND, backend, 0, 0),
	CFG("listen", T_LISTEN, listen, 0, 0),
	CFG("admin_socket", T_SOCK, admin_socket, 0, 0),
	CFG("log_level", T_LOGLEVEL, log_level, 0, 0),
	CFG("prometheus", T_ADDR_OPT, prometheus, 0, 0),
	CFG("max_requests_per_conn", T_U32, max_requests_per_conn, 1, 4096),
	CFG("max_bytes_per_conn", T_BYTES, max_bytes_per_conn, 1ull << 20, 4ull << 30),
	CFG("handshake_timeout", T_MS, handshake_timeout_ms, 1000, 3600000),
	CFG("tls", T_TLS, tls, 0, 0),
	CFG("tls_certificates", T_STR_OPT, tls_certificates, 0, 0),
	CFG("tls_psk_file", T_STR_OPT, tls_psk_file, 0, 0),
	CFG("tls_priority", T_STR_OPT, tls_priority, 0, 0),
	CFG("tls_verify_peer", T_BOOL, tls_verify_peer, 0, 0),
	CFG("allow_plaintext", T_BOOL, allow_plaintext, 0, 0),
	CFG("socket_mode", T_MODE, socket_mode, 0, 0777),
	CFG("socket_group", T_STR_OPT, socket_group, 0, 0),
	CFG("max_connections", T_U32, max_connections, 0, 1000000),
	CFG("max_bytes_in_flight", T_BYTES, max_bytes_in_flight, 1ull << 20, 1ull << 40),
	CFG("transmission_timeout", T_MS, transmission_timeout_ms, 100, 3600000),
	CFG("shutdown_timeout", T_MS, shutdown_timeout_ms, 1000, 3600000),
	CFG("client_timeout", T_MS, client_timeout_ms, 100, 3600000),
	CFG("threads", T_U32, threads, 0, 1024),
	CFG("busy_poll_us", T_U32, busy_poll_us, 0, 10000),
	{NULL, 0, 0, 0, 0, 0},
};

static const struct kdesc local_keys[] = {
	CFG("data_dir", T_STR, data_dir, 0, 0),
	CFG("base_dir", T_STR_OPT, base_dir, 0, 0),
	CFG("cache_dir", T_STR_OPT, cache_dir, 0, 0),
	CFG("direct_io", T_BOOL, direct_io, 0, 0),
	OVR("base_profile", T_PROFILE, B_BASE_OVR, profile, 0, 0),
	OVR("base_latency_us", T_U64, B_BASE_OVR, lat, 0, LAT_MAX),
	OVR("base_read_latency_us", T_U64, B_BASE_OVR, read_lat, 0, LAT_MAX),
	OVR("base_write_latency_us", T_U64, B_BASE_OVR, write_lat, 0, LAT_MAX),
	OVR("base_bandwidth", T_BYTES, B_BASE_OVR, bw, 0, UINT64_MAX - 1),
	OVR("base_queue_depth", T_U64, B_BASE_OVR, qd, 0, 65536),
	OVR("cache_profile", T_PROFILE, B_CACHE_OVR, profile, 0, 0),
	OVR("cache_latency_us", T_U64, B_CACHE_OVR, lat, 0, LAT_MAX),
	OVR("cache_read_latency_us", T_U64, B_CACHE_OVR, read_lat, 0, LAT_MAX),
	OVR("cache_write_latency_us", T_U64, B_CACHE_OVR, write_lat, 0, LAT_MAX),
	OVR("cache_bandwidth", T_BYTES, B_CACHE_OVR, bw, 0, UINT64_MAX - 1),
	OVR("cache_queue_depth", T_U64, B_CACHE_OVR, qd, 0, 65536),
	{NULL, 0, 0, 0, 0, 0},
};

static const struct kdesc rados_keys[] = {
	CFG("conf", T_STR, rados_conf, 0, 0),
	CFG("client_name", T_CLIENT, rados_client_name, 0, 0),
	CFG("keyring", T_STR_OPT, rados_keyring, 0, 0),
	CFG("base_pool", T_STR, rados_base_pool, 0, 0),
	CFG("cache_pool", T_STR, rados_cache_pool, 0, 0),
	CFG("base_namespace", T_STR_OPT, rados_base_ns, 0, 0),
	CFG("cache_namespace", T_STR_OPT, rados_cache_ns, 0, 0),
	CFG("op_timeout", T_MS, rados_op_timeout_ms, 0, 3600000),
	{NULL, 0, 0, 0, 0, 0},
};

static const struct kdesc image_keys[] = {
	IMG("size", T_BYTES, size, 512, 1ull << 60),
	IMG("rbd_image", T_STR, rbd_image, 0, 0),
	IMG("read_only", T_BOOL, read_only, 0, 0),
	IMG("lock_handoff", T_HANDOFF, lock_handoff, 0, 0),
	{NULL, 0, 0, 0, 0, 0},
};

static const char *const backend_names[] = {"local", "rados", NULL};
static const char *const level_names[] = {"error", "warn", "info", "debug", NULL};
static const char *const tls_names[] = {"off", "on", "require", NULL};
static const char *const handoff_names[] = {"on_request", "never", NULL};

/* ---- small helpers ---- */

static char *xstrdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

static int replace_str(char **dst, const char *s)
{
	char *n = NULL;

	if (s) {
		n = strdup(s);
		if (!n)
			return -ENOMEM;
	}
	free(*dst);
	*dst = n;
	return 0;
}

static int enum_index(const char *const *names, const char *v)
{
	for (int i = 0; names[i]; i++)
		if (strcasecmp(names[i], v) == 0)
			return i;
	return -1;
}

static void names_join(const char *const *names, char *out, size_t len)
{
	size_t n = 0;

	out[0] = '\0';
	for (int i = 0; names[i] && n < len; i++)
		n += (size_t)snprintf(out + n, len - n, "%s%s", i ? "|" : "", names[i]);
}

/* Edit distance, for "did you mean". */
static size_t distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), prev[64], cur[64];

	if (la >= 63 || lb >= 63)
		return 99;
	for (size_t j = 0; j <= lb; j++)
		prev[j] = j;
	for (size_t i = 1; i <= la; i++) {
		cur[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
			size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
			cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
		}
		memcpy(prev, cur, sizeof(prev));
	}
	return prev[lb];
}

static void fail(struct parse_ctx *x, int line, const char *section, const char *key, int rc,
		 const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static void fail(struct parse_ctx *x, int line, const char *section, const char *key, int rc,
		 const char *fmt, ...)
{
	char msg[1024], where[160] = "";
	va_list ap;

	if (x->rc && (x->err_line == 0 || line == 0 || x->err_line <= line))
		return;   /* keep the first error in file order */
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (section && key)
		snprintf(where, sizeof(where), " [%s] %s:", section, key);
	else if (section)
		snprintf(where, sizeof(where), " [%s]:", section);
	if (line > 0)
		snprintf(x->err, x->errlen, "%s:%d:%s %s", x->path, line, where, msg);
	else
		snprintf(x->err, x->errlen, "%s:%s %s", x->path, where, msg);
	x->rc = rc;
	x->err_line = line;
}

/* ---- value checks ---- */

static bool valid_port(const char *p)
{
	uint64_t v;
	return tier_parse_u64(p, &v) == 0 && v >= 1 && v <= 65535;
}

/* "unix:/path", "host:port", "[v6]:port". */
static bool valid_addr(const char *s, bool allow_unix)
{
	const char *colon;

	if (strncmp(s, "unix:", 5) == 0)
		return allow_unix && s[5] && strlen(s + 5) <= SUN_PATH_MAX;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		return close && close > s + 1 && close[1] == ':' && valid_port(close + 2);
	}
	colon = strchr(s, ':');
	if (!colon || colon == s || strchr(colon + 1, ':'))
		return false;
	for (const char *p = s; p < colon; p++)
		if (isspace((unsigned char)*p))
			return false;
	return valid_port(colon + 1);
}

static int add_listen(struct tierd_config *c, const char *value, char *msg, size_t len)
{
	char *copy = strdup(value), *save = NULL, *tok;
	int r = 0;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		while (isspace((unsigned char)*tok))
			tok++;
		for (size_t n = strlen(tok); n > 0 && isspace((unsigned char)tok[n - 1]); n--)
			tok[n - 1] = '\0';
		if (!valid_addr(tok, true)) {
			snprintf(msg, len, "bad address '%s' (allowed: unix:/PATH, HOST:PORT, [IPV6]:PORT)",
				 tok);
			r = -EINVAL;
			goto out;
		}
		for (size_t i = 0; i < c->n_listen; i++) {
			if (strcmp(c->listen[i], tok) == 0) {
				snprintf(msg, len, "address '%s' listed twice", tok);
				r = -EINVAL;
				goto out;
			}
		}
		if (c->n_listen == TIERD_MAX_LISTEN) {
			snprintf(msg, len, "too many addresses (allowed: at most %d)", TIERD_MAX_LISTEN);
			r = -E2BIG;
			goto out;
		}
		c->listen[c->n_listen] = strdup(tok);
		if (!c->listen[c->n_listen]) {
			r = -ENOMEM;
			goto out;
		}
		c->n_listen++;
	}
	if (c->n_listen == 0) {
		snprintf(msg, len, "empty (allowed: unix:/PATH, HOST:PORT, [IPV6]:PORT)");
		r = -EINVAL;
	}
out:
	free(copy);
	return r;
}

static int parse_number(const struct kdesc *d, const char *v, uint64_t *u)
{
	char buf[64];
	size_t n = strlen(v);

	if (d->t == T_BYTES && n > 2 && n < sizeof(buf) && strcmp(v + n - 2, "/s") == 0) {
		memcpy(buf, v, n - 2);   /* bandwidth: "150M/s" */
		buf[n - 2] = '\0';
		v = buf;
	}
	int r = d->t == T_BYTES ? tier_parse_bytes(v, u) :
		d->t == T_MS ? tier_parse_ms(v, u) : tier_parse_u64(v, u);
	if (r == 0 && (*u < d->lo || *u > d->hi))
		r = -ERANGE;
	return r;
}

static void number_allowed(const struct kdesc *d, char *out, size_t len)
{
	const char *unit = d->t == T_BYTES ? " bytes, units K/M/G/T" :
			   d->t == T_MS ? " ms, units ms/s/m/h, bare = seconds" : "";
	if (d->hi >= UINT64_MAX - 1)
		snprintf(out, len, "%llu or more%s", (unsigned long long)d->lo, unit);
	else
		snprintf(out, len, "%llu..%llu%s", (unsigned long long)d->lo,
			 (unsigned long long)d->hi, unit);
}

static int set_string(const struct kdesc *d, char **dst, const char *v, char *msg, size_t len)
{
	if (d->t == T_STR_OPT || d->t == T_ADDR_OPT) {
		if (!*v || (d->t == T_ADDR_OPT && (!strcasecmp(v, "off") || !strcasecmp(v, "none"))))
			return replace_str(dst, NULL);
	}
	if (!*v) {
		snprintf(msg, len, "empty value (allowed: a non-empty string)");
		return -EINVAL;
	}
	if (d->t == T_SOCK && strlen(v) > SUN_PATH_MAX) {
		snprintf(msg, len, "path too long (allowed: at most %d characters)", SUN_PATH_MAX);
		return -ENAMETOOLONG;
	}
	if (d->t == T_ADDR_OPT && !valid_addr(v, false)) {
		snprintf(msg, len, "bad address '%s' (allowed: HOST:PORT, [IPV6]:PORT, off)", v);
		return -EINVAL;
	}
	if (d->t == T_CLIENT && !strchr(v, '.')) {
		char full[256];
		snprintf(full, sizeof(full), "client.%s", v);
		return replace_str(dst, full);
	}
	return replace_str(dst, v);
}

static int set_enum(const char *const *names, int *dst, const char *v, char *msg, size_t len)
{
	char allowed[128];
	int i = enum_index(names, v);

	if (i < 0) {
		names_join(names, allowed, sizeof(allowed));
		snprintf(msg, len, "bad value '%s' (allowed: %s)", v, allowed);
		return -EINVAL;
	}
	*dst = i;
	return 0;
}

/* Store value v for key d into the object at base. */
static int apply(struct tierd_config *c, const struct kdesc *d, void *base, const char *v,
		 char *msg, size_t len)
{
	static const char *const profiles[] = {"hdd", "hdd-journal", "ssd", "none", NULL};
	void *f = (char *)base + d->off;
	char allowed[128];
	uint64_t u = 0;
	int b, r, i = 0;

	switch (d->t) {
	case T_BACKEND:
		return set_enum(backend_names, (int *)f, v, msg, len);
	case T_LOGLEVEL:
		return set_enum(level_names, (int *)f, v, msg, len);
	case T_TLS:
		return set_enum(tls_names, (int *)f, v, msg, len);
	case T_HANDOFF:
		return set_enum(handoff_names, (int *)f, v, msg, len);
	case T_MODE: {
		char *end;
		unsigned long m;

		errno = 0;
		m = strtoul(v, &end, 8);
		if (errno || end == v || *end || m > d->hi) {
			snprintf(msg, len, "bad mode '%s' (allowed: octal 0..0777, e.g. 0660)", v);
			return -EINVAL;
		}
		*(uint32_t *)f = (uint32_t)m;
		return 0;
	}
	case T_PROFILE:
		r = set_enum(profiles, &i, v, msg, len);
		return r < 0 ? r : replace_str((char **)f, profiles[i]);
	case T_LISTEN:
		return add_listen(c, v, msg, len);
	case T_BOOL:
		if (tier_parse_bool(v, &b) < 0) {
			snprintf(msg, len, "bad value '%s' (allowed: true|false|yes|no|on|off|1|0)", v);
			return -EINVAL;
		}
		*(bool *)f = b;
		return 0;
	case T_U32:
	case T_U64:
	case T_BYTES:
	case T_MS:
		r = parse_number(d, v, &u);
		if (r < 0) {
			number_allowed(d, allowed, sizeof(allowed));
			snprintf(msg, len, "%s '%s' (allowed: %s)",
				 r == -ERANGE ? "out of range" : "bad value", v, allowed);
			return r;
		}
		if (d->t == T_U32)
			*(uint32_t *)f = (uint32_t)u;
		else
			*(uint64_t *)f = u;
		return 0;
	default:
		return set_string(d, (char **)f, v, msg, len);
	}
}

/* ---- sections ---- */

static bool valid_image_name(const char *n)
{
	size_t len = strlen(n);

	if (len == 0 || len > 64)
		return false;
	for (const char *p = n; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
			return false;
	return true;
}

static struct tierd_image_cfg *find_image(struct tierd_config *c, const char *name, size_t *idx)
{
	for (size_t i = 0; i < c->n_images; i++) {
		if (strcmp(c->images[i].name, name) == 0) {
			if (idx)
				*idx = i;
			return &c->images[i];
		}
	}
	return NULL;
}

/* Seeing a section (from its header line or its first key).  Idempotent. */
static void section_enter(struct parse_ctx *x, const char *section, int line)
{
	struct tierd_config *c = x->c;

	if (!strcmp(section, "global") || !strcmp(section, "local") || !strcmp(section, "rados"))
		return;
	if (!strcmp(section, "tier")) {
		if (!x->tier_line)
			x->tier_line = line;
		return;
	}
	if (strncmp(section, "image.", 6) != 0) {
		fail(x, line, section, NULL, -EINVAL,
		     "unknown section (allowed: global, local, rados, tier, image.NAME)");
		return;
	}
	const char *name = section + 6;
	if (!valid_image_name(name)) {
		fail(x, line, section, NULL, -EINVAL,
		     "bad image name '%s' (allowed: 1..64 of A-Z a-z 0-9 . _ -)", name);
		return;
	}
	if (find_image(c, name, NULL))
		return;
	if (c->n_images == TIERD_MAX_IMAGES) {
		fail(x, line, section, NULL, -E2BIG, "too many images (allowed: at most %d)",
		     TIERD_MAX_IMAGES);
		return;
	}
	struct tierd_image_cfg *img = &c->images[c->n_images];
	img->name = strdup(name);
	if (!img->name) {
		fail(x, line, section, NULL, -ENOMEM, "out of memory");
		return;
	}
	x->image_line[c->n_images++] = line;
}

/* The reader counts lines, spots section headers and over-long lines. */
static char *reader(char *str, int num, void *stream)
{
	struct parse_ctx *x = stream;
	char *s = fgets(str, num, x->f), *p;
	size_t n;
	int ch;

	if (!s)
		return NULL;
	x->line++;
	n = strlen(s);
	if (n == (size_t)num - 1 && s[n - 1] != '\n' && !feof(x->f)) {
		fail(x, x->line, NULL, NULL, -EINVAL, "line too long (allowed: %d characters)",
		     num - 2);
		while ((ch = fgetc(x->f)) != EOF && ch != '\n')
			;
		strcpy(str, "\n");
		return str;
	}
	p = s;
	if (x->line == 1 && !strncmp(p, "\xEF\xBB\xBF", 3))
		p += 3;
	if (*p == '[') {
		char *close = strchr(p, ']');
		if (close) {
			*close = '\0';
			section_enter(x, p + 1, x->line);
			*close = ']';
		}
	}
	return str;
}

static const struct kdesc *section_keys(const char *section)
{
	if (!strcmp(section, "global"))
		return global_keys;
	if (!strcmp(section, "local"))
		return local_keys;
	if (!strcmp(section, "rados"))
		return rados_keys;
	if (!strncmp(section, "image.", 6))
		return image_keys;
	return NULL;
}

/* Returns true when (section, key) was seen before; records it otherwise. */
static bool seen_before(struct parse_ctx *x, const char *section, const char *key, int *first)
{
	struct seen_key *n;

	for (size_t i = 0; i < x->n_seen; i++) {
		if (!strcmp(x->seen[i].section, section) && !strcmp(x->seen[i].key, key)) {
			*first = x->seen[i].line;
			return true;
		}
	}
	n = realloc(x->seen, (x->n_seen + 1) * sizeof(*n));
	if (!n)
		return false;
	x->seen = n;
	n[x->n_seen].section = strdup(section);
	n[x->n_seen].key = strdup(key);
	n[x->n_seen].line = x->line;
	if (n[x->n_seen].section && n[x->n_seen].key)
		x->n_seen++;
	else {
		free(n[x->n_seen].section);
		free(n[x->n_seen].key);
	}
	return false;
}

struct suggest {
	const char *key;
	const char *best;
	size_t dist;
	char list[1024];
	size_t n;
};

static void suggest_add(void *arg, const char *cand, const char *value)
{
	struct suggest *s = arg;
	size_t la = strlen(s->key), lb = strlen(cand);
	/* the length difference is a lower bound of the edit distance */
	size_t d = (la > lb ? la - lb : lb - la) >= s->dist ? s->dist : distance(s->key, cand);

	(void)value;
	if (d < s->dist) {
		s->dist = d;
		s->best = cand;
	}
	if (s->n < sizeof(s->list))
		s->n += (size_t)snprintf(s->list + s->n, sizeof(s->list) - s->n, "%s%s",
					 s->n ? ", " : "", cand);
}

static void unknown_key(struct parse_ctx *x, const char *section, const char *key,
			const struct kdesc *keys)
{
	struct suggest s = {.key = key, .dist = 3};
	char mean[96] = "";

	if (x->rc && (x->err_line == 0 || x->line == 0 || x->err_line <= x->line))
		return;   /* fail() keeps an earlier error: spare the suggestions */
	if (keys) {
		for (const struct kdesc *d = keys; d->name; d++)
			suggest_add(&s, d->name, NULL);
	} else {
		struct tier_params p;
		tier_params_default(&p);
		tier_params_foreach(&p, suggest_add, &s);
	}
	if (s.best)
		snprintf(mean, sizeof(mean), ", did you mean '%s'?", s.best);
	fail(x, x->line, section, key, -ENOENT, "unknown key%s (allowed: %s)", mean, s.list);
}

static void normalize_key(const char *in, char *out, size_t len)
{
	size_t i;

	for (i = 0; in[i] && i + 1 < len; i++)
		out[i] = (in[i] == ' ' || in[i] == '-') ? '_' : (char)tolower((unsigned char)in[i]);
	out[i] = '\0';
}

static void strip_hash_comment(const char *in, char *out, size_t len)
{
	snprintf(out, len, "%s", in);
	for (char *p = out; *p; p++) {
		if (*p == '#' && (p == out || isspace((unsigned char)p[-1]))) {
			*p = '\0';
			break;
		}
	}
	for (size_t n = strlen(out); n > 0 && isspace((unsigned char)out[n - 1]); n--)
		out[n - 1] = '\0';
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
	struct parse_ctx *x = user;
	char key[64], v[512], msg[1024];
	const struct kdesc *keys, *d = NULL;
	void *base = x->c;
	int first, r;

	normalize_key(name, key, sizeof(key));
	strip_hash_comment(value, v, sizeof(v));
	if (!*section) {
		fail(x, x->line, NULL, key, -EINVAL,
		     "key outside any section (allowed sections: global, local, rados, tier, image.NAME)");
		return 1;
	}
	section_enter(x, section, x->line);
	if (strcmp(key, "listen") && seen_before(x, section, key, &first)) {
		fail(x, x->line, section, key, -EINVAL, "duplicate key (first set at line %d)", first);
		return 1;
	}
	if (!strcmp(section, "tier") && !strcmp(key, "tier_preset")) {
		struct tier_params t = x->c->tier;

		if (tier_params_preset(&t, v, msg, sizeof(msg)) < 0) {
			fail(x, x->line, section, key, -EINVAL, "%s", msg);
			return 1;
		}
		free(x->preset);
		x->preset = strdup(v);
		x->preset_line = x->line;
		if (!x->preset)
			fail(x, x->line, section, key, -ENOMEM, "out of memory");
		return 1;
	}
	if (!strcmp(section, "tier")) {
		r = tier_params_set(&x->c->tier, key, v, msg, sizeof(msg));
		if (r == -ENOENT)
			unknown_key(x, section, key, NULL);
		else if (r < 0)
			fail(x, x->line, section, key, r, "%s", msg);
		return 1;
	}
	keys = section_keys(section);
	if (!keys)
		return 1;   /* unknown section, reported at its header */
	for (const struct kdesc *k = keys; k->name; k++)
		if (!strcmp(k->name, key))
			d = k;
	if (!d) {
		unknown_key(x, section, key, keys);
		return 1;
	}
	if (d->base == B_BASE_OVR || d->base == B_CACHE_OVR)
		base = &x->ovr[d->base == B_CACHE_OVR];
	else if (d->base == B_IMG && !(base = find_image(x->c, section + 6, NULL)))
		return 1;   /* bad image section, already reported */
	msg[0] = '\0';
	if (d->t == T_LISTEN && !x->listen_from_file) {
		for (size_t i = 0; i < x->c->n_listen; i++)
			free(x->c->listen[i]);
		x->c->n_listen = 0;
		x->listen_from_file = true;
	}
	r = apply(x->c, d, base, v, msg, sizeof(msg));
	if (r < 0)
		fail(x, x->line, section, key, r, "%s", msg[0] ? msg : strerror(-r));
	return 1;
}

/* ---- after the file: overrides and cross-checks ---- */

static void apply_model(struct parse_ctx *x, int which, struct tier_devmodel_params *m)
{
	const struct model_ovr *o = &x->ovr[which];

	if (o->profile)
		tier_devmodel_profile(o->profile, m);
	if (o->lat != UNSET)
		m->read_latency_us = m->write_latency_us = (uint32_t)o->lat;
	if (o->read_lat != UNSET)
		m->read_latency_us = (uint32_t)o->read_lat;
	if (o->write_lat != UNSET)
		m->write_latency_us = (uint32_t)o->write_lat;
	if (o->bw != UNSET)
		m->bandwidth = o->bw;
	if (o->qd != UNSET)
		m->queue_depth = (uint32_t)o->qd;
}

/*
 * tier_preset sets the values of its preset, then every key set in [tier]
 * wins over it, wherever it stands in the section.
 */
static void apply_preset(struct parse_ctx *x)
{
	struct tier_params t;
	char msg[256], val[128];

	if (!x->preset)
		return;
	tier_params_default(&t);
	if (tier_params_preset(&t, x->preset, msg, sizeof(msg)) < 0) {
		fail(x, x->preset_line, "tier", "tier_preset", -EINVAL, "%s", msg);
		return;
	}
	for (size_t i = 0; i < x->n_seen; i++) {
		const char *k = x->seen[i].key;

		if (strcmp(x->seen[i].section, "tier") || !strcmp(k, "tier_preset"))
			continue;
		if (tier_params_get(&x->c->tier, k, val, sizeof(val)) == 0)
			(void)tier_params_set(&t, k, val, msg, sizeof(msg));
	}
	x->c->tier = t;
}

bool tierd_addr_is_loopback(const char *addr)
{
	char host[64];
	const char *colon = strrchr(addr, ':');
	size_t n;

	if (!colon || !strncmp(addr, "unix:", 5))
		return false;
	n = (size_t)(colon - addr);
	if (addr[0] == '[' && n >= 2) {
		addr++;
		n -= 2;
	}
	if (n == 0 || n >= sizeof(host))
		return false;
	memcpy(host, addr, n);
	host[n] = '\0';
	if (!strcmp(host, "::1") || !strcmp(host, "0:0:0:0:0:0:0:1"))
		return true;
	return !strncmp(host, "127.", 4) && strspn(host, "0123456789.") == n;
}

/*
 * A listener anybody on the network can reach serves plaintext only when the
 * operator says so: with tls off or on, nothing stops a client that skips
 * STARTTLS.
 */
static void security_check(struct parse_ctx *x)
{
	struct tierd_config *c = x->c;

	for (size_t i = 0; i < c->n_listen; i++) {
		const char *a = c->listen[i];

		if (!strncmp(a, "unix:", 5) || tierd_addr_is_loopback(a) ||
		    c->tls == 2 || c->allow_plaintext)
			continue;
		fail(x, 0, "global", "listen", -EPERM,
		     "'%s' is reachable from the network but tls is %s: set tls = require "
		     "(with tls_certificates or tls_psk_file), or allow_plaintext = true to "
		     "serve unencrypted, unauthenticated NBD on it", a, tls_names[c->tls]);
		return;
	}
	if (c->tls && !c->tls_certificates && !c->tls_psk_file)
		fail(x, 0, "global", "tls", -EINVAL,
		     "tls = %s needs tls_certificates = DIR or tls_psk_file = FILE",
		     tls_names[c->tls]);
	if (c->tls_verify_peer && !c->tls_certificates)
		fail(x, 0, "global", "tls_verify_peer", -EINVAL,
		     "needs tls_certificates (its ca-cert.pem signs the client certificates)");
}

static void cross_check(struct parse_ctx *x)
{
	struct tierd_config *c = x->c;
	char msg[512], sec[80];
	int r;

	apply_preset(x);
	apply_model(x, 0, &c->base_model);
	apply_model(x, 1, &c->cache_model);
	r = tier_params_check(&c->tier, msg, sizeof(msg));
	if (r < 0)
		fail(x, x->tier_line, "tier", NULL, r, "%s", msg);
	if (c->n_listen == 0)
		fail(x, 0, "global", "listen", -EINVAL, "at least one address is required");
	security_check(x);
	if (c->backend == TIERD_BACKEND_LOCAL) {
		char b[4096], k[4096];

		tierd_config_pool_dir(c, false, b, sizeof(b));
		tierd_config_pool_dir(c, true, k, sizeof(k));
		if (!strcmp(b, k))
			fail(x, 0, "local", "cache_dir", -EINVAL, "%s is the base pool's directory "
			     "too (allowed: one directory per pool)", k);
	}
	for (size_t i = 0; i < c->n_images; i++) {
		struct tierd_image_cfg *img = &c->images[i];
		int line = x->image_line[i];
		snprintf(sec, sizeof(sec), "image.%s", img->name);
		if (c->backend == TIERD_BACKEND_LOCAL) {
			if (img->size == 0)
				fail(x, line, sec, "size", -EINVAL,
				     "required with backend = local (allowed: 512 bytes or more, units K/M/G/T)");
			else if (img->size % 512)
				fail(x, line, sec, "size", -EINVAL,
				     "%llu is not a multiple of 512", (unsigned long long)img->size);
			if (img->rbd_image)
				fail(x, line, sec, "rbd_image", -EINVAL,
				     "only with backend = rados (allowed here: size, read_only)");
			if (img->lock_handoff)
				fail(x, line, sec, "lock_handoff", -EINVAL,
				     "only with backend = rados (an RBD image's lock)");
		} else {
			if (img->size)
				fail(x, line, sec, "size", -EINVAL,
				     "the size comes from the RBD header with backend = rados (allowed here: rbd_image, read_only)");
			if (!img->rbd_image && replace_str(&img->rbd_image, img->name) < 0)
				fail(x, line, sec, "rbd_image", -ENOMEM, "out of memory");
		}
	}
}

/* ---- public ---- */

void tierd_config_defaults(struct tierd_config *c)
{
	memset(c, 0, sizeof(*c));
	c->backend = TIERD_BACKEND_LOCAL;
	c->listen[0] = xstrdup(TIERD_DEFAULT_LISTEN);
	c->n_listen = c->listen[0] ? 1 : 0;
	c->admin_socket = xstrdup("/run/tierd/tierd.asok");
	c->log_level = TIER_LOG_INFO;
	c->max_requests_per_conn = 64;
	c->max_bytes_per_conn = 64ull << 20;
	c->handshake_timeout_ms = 30000;
	c->tls = 0;
	c->socket_mode = 0660;
	c->max_connections = 0;
	c->max_bytes_in_flight = 512ull << 20;
	c->transmission_timeout_ms = 30000;
	c->shutdown_timeout_ms = 30000;
	c->client_timeout_ms = 10000;
	c->threads = 1;
	c->busy_poll_us = 100;
	c->data_dir = xstrdup("/var/lib/tierd");
	/* real speed: device models are for demos, benchmarks and tests, asked for */
	tier_devmodel_profile("none", &c->base_model);
	tier_devmodel_profile("none", &c->cache_model);
	c->direct_io = false;
	c->rados_conf = xstrdup("/etc/ceph/ceph.conf");
	c->rados_client_name = xstrdup("client.admin");
	c->rados_base_pool = xstrdup("rbd");
	c->rados_cache_pool = xstrdup("rbd-cache");
	c->rados_op_timeout_ms = 30000;
	tier_params_default(&c->tier);
}

void tierd_config_pool_dir(const struct tierd_config *c, bool cache, char *buf, size_t len)
{
	const char *d = cache ? c->cache_dir : c->base_dir;

	if (d && *d)
		snprintf(buf, len, "%s", d);
	else
		snprintf(buf, len, "%s/%s", c->data_dir ? c->data_dir : "/var/lib/tierd",
			 cache ? "cache" : "base");
}

void tierd_config_free(struct tierd_config *c)
{
	if (!c)
		return;
	free(c->path);
	for (size_t i = 0; i < c->n_listen; i++)
		free(c->listen[i]);
	free(c->admin_socket);
	free(c->prometheus);
	free(c->tls_certificates);
	free(c->tls_psk_file);
	free(c->tls_priority);
	free(c->socket_group);
	free(c->data_dir);
	free(c->base_dir);
	free(c->cache_dir);
	free(c->rados_conf);
	free(c->rados_client_name);
	free(c->rados_keyring);
	free(c->rados_base_pool);
	free(c->rados_cache_pool);
	free(c->rados_base_ns);
	free(c->rados_cache_ns);
	for (size_t i = 0; i < c->n_images; i++) {
		free(c->images[i].name);
		free(c->images[i].rbd_image);
	}
	free(c);
}

static bool defaults_allocated(const struct tierd_config *c)
{
	return c->n_listen == 1 && c->admin_socket && c->data_dir && c->rados_conf &&
	       c->rados_client_name && c->rados_base_pool && c->rados_cache_pool;
}

int tierd_config_load(const char *path, struct tierd_config **out, char *err, size_t errlen)
{
	struct parse_ctx x = {.path = path, .err = err, .errlen = errlen};
	struct tierd_config *c = NULL;
	int r;

	*out = NULL;
	if (errlen)
		err[0] = '\0';
	for (int i = 0; i < 2; i++)
		x.ovr[i] = (struct model_ovr){NULL, UNSET, UNSET, UNSET, UNSET, UNSET};
	c = calloc(1, sizeof(*c));
	if (!c) {
		r = -ENOMEM;
		goto out;
	}
	tierd_config_defaults(c);
	c->path = xstrdup(path);
	x.c = c;
	if (!defaults_allocated(c) || !c->path) {
		r = -ENOMEM;
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	x.f = fopen(path, "re");
	if (!x.f) {
		r = -errno;
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		goto out;
	}
	r = ini_parse_stream(reader, &x, handler, &x);
	if (ferror(x.f)) {
		r = -EIO;
		snprintf(err, errlen, "%s: read error", path);
		goto out;
	}
	if (r > 0)
		fail(&x, r, NULL, NULL, -EINVAL,
		     "syntax error (allowed: [section], key = value, # or ; comments)");
	else if (r < 0)
		fail(&x, 0, NULL, NULL, -ENOMEM, "out of memory");
	if (!x.rc)
		cross_check(&x);
	r = x.rc;
out:
	if (x.f)
		fclose(x.f);
	for (size_t i = 0; i < x.n_seen; i++) {
		free(x.seen[i].section);
		free(x.seen[i].key);
	}
	free(x.seen);
	free(x.preset);
	free(x.ovr[0].profile);
	free(x.ovr[1].profile);
	if (r < 0)
		tierd_config_free(c);
	else
		*out = c;
	return r;
}

/* ---- the keys, as text: for the man page (docs/man) and its test ---- */

/*
 * Keys outside [tier] that a reload applies to the running daemon (main.c
 * do_reload; docs/OPERATIONS.md "Reload"); every other one waits for a
 * restart.  [tier] keys: tier_params_is_live.
 */
static const char *const reload_live[] = {
	"global.log_level", "global.max_requests_per_conn", "global.max_bytes_per_conn",
	"global.handshake_timeout", "image.read_only", NULL,
};

static bool key_is_live(const char *section, const char *key)
{
	char full[64];

	snprintf(full, sizeof(full), "%s.%s", section, key);
	for (size_t i = 0; reload_live[i]; i++)
		if (!strcmp(reload_live[i], full))
			return true;
	return false;
}

static void number_text(const struct kdesc *d, uint64_t v, char *out, size_t len)
{
	if (d->t == T_BYTES)
		tier_format_bytes(v, out, len);
	else if (d->t == T_MS)
		tier_format_ms(v, out, len);
	else
		snprintf(out, len, "%llu", (unsigned long long)v);
}

/* number_allowed with the bounds in the units the file takes: "1s..1h, units ...". */
static void number_range(const struct kdesc *d, char *out, size_t len)
{
	const char *unit = d->t == T_BYTES ? ", units K/M/G/T" :
			   d->t == T_MS ? ", units ms/s/m/h, bare = seconds" : "";
	char lo[32], hi[32];

	number_text(d, d->lo, lo, sizeof(lo));
	number_text(d, d->hi, hi, sizeof(hi));
	if (d->hi >= UINT64_MAX - 1)
		snprintf(out, len, "%s or more%s", lo, unit);
	else
		snprintf(out, len, "%s..%s%s", lo, hi, unit);
}

/* Default and allowed values of a key of the kdesc tables, as the file spells them. */
static void key_text(const struct tierd_config *c, const struct kdesc *d, char *def, size_t dlen,
		     char *allowed, size_t alen)
{
	static const struct tierd_image_cfg no_image;
	const void *base = d->base == B_IMG ? (const void *)&no_image : (const void *)c;
	const void *f = (const char *)base + d->off;
	const char *s;
	uint64_t u;

	def[0] = allowed[0] = '\0';
	if (d->base == B_BASE_OVR || d->base == B_CACHE_OVR) {
		if (d->t == T_PROFILE) {
			snprintf(def, dlen, "none");
			snprintf(allowed, alen, "hdd|hdd-journal|ssd|none");
		} else {
			snprintf(def, dlen, "from the profile");
			number_range(d, allowed, alen);
		}
		return;
	}
	switch (d->t) {
	case T_BACKEND:
		snprintf(def, dlen, "%s", backend_names[c->backend]);
		names_join(backend_names, allowed, alen);
		return;
	case T_LOGLEVEL:
		snprintf(def, dlen, "%s", level_names[c->log_level]);
		names_join(level_names, allowed, alen);
		return;
	case T_TLS:
		snprintf(def, dlen, "%s", tls_names[c->tls]);
		names_join(tls_names, allowed, alen);
		return;
	case T_MODE:
		snprintf(def, dlen, "0%o", (unsigned)*(const uint32_t *)f);
		snprintf(allowed, alen, "octal 0..0%llo", (unsigned long long)d->hi);
		return;
	case T_LISTEN:
		snprintf(def, dlen, "%s", c->n_listen ? c->listen[0] : "");
		snprintf(allowed, alen, "unix:/PATH, HOST:PORT, [IPV6]:PORT; repeated or "
			 "comma-separated for more than one");
		return;
	case T_BOOL:
		snprintf(def, dlen, "%s", *(const bool *)f ? "true" : "false");
		snprintf(allowed, alen, "true|false|yes|no|on|off|1|0");
		return;
	case T_U32:
	case T_U64:
	case T_BYTES:
	case T_MS:
		u = d->t == T_U32 ? *(const uint32_t *)f : *(const uint64_t *)f;
		if (u || d->base != B_IMG)   /* an image's size has none */
			number_text(d, u, def, dlen);
		number_range(d, allowed, alen);
		return;
	case T_HANDOFF:
		snprintf(def, dlen, "%s", handoff_names[*(const int *)f]);
		names_join(handoff_names, allowed, alen);
		return;
	case T_PROFILE:   /* [local] overrides only: above */
		return;
	case T_STR:
	case T_STR_OPT:
	case T_SOCK:
	case T_ADDR_OPT:
	case T_CLIENT:
		s = *(char *const *)f;
		if (f == (const void *)&c->base_dir || f == (const void *)&c->cache_dir)
			s = f == (const void *)&c->base_dir ? "DATA_DIR/base" : "DATA_DIR/cache";
		snprintf(def, dlen, "%s", s ? s : "");
		snprintf(allowed, alen, "%s",
			 d->t == T_SOCK ? "a unix socket path" :
			 d->t == T_ADDR_OPT ? "HOST:PORT, [IPV6]:PORT, off" :
			 d->t == T_CLIENT ? "a Ceph entity name (client. is added when missing)" :
			 d->t == T_STR_OPT ? "a string; empty = unset" : "a non-empty string");
		return;
	}
	/* no default: a new type warns (-Wswitch) until it is given its text here */
}

/* [tier]: tier_preset, then the parameter table's keys.  false past its end. */
static bool tier_key(size_t i, struct tierd_config_key *out)
{
	struct tier_param_info p;
	size_t m = 0;

	if (i > 0) {
		if (tier_params_info(i - 1, &p) < 0)
			return false;
		out->key = p.key;
		snprintf(out->def, sizeof(out->def), "%s", p.def);
		snprintf(out->allowed, sizeof(out->allowed), "%s", p.allowed);
		out->live = p.live;
		return true;
	}
	out->key = "tier_preset";
	snprintf(out->def, sizeof(out->def), "tierd");
	for (size_t j = 0; tier_params_preset_info(j, NULL) && m < sizeof(out->allowed); j++)
		m += (size_t)snprintf(out->allowed + m, sizeof(out->allowed) - m, "%s%s",
				      j ? "|" : "", tier_params_preset_info(j, NULL));
	out->live = true;   /* the parameters it sets apply live */
	return true;
}

int tierd_config_key_info(size_t i, struct tierd_config_key *out)
{
	static const struct {
		const char *section, *live_as;
		const struct kdesc *keys;   /* NULL: [tier] */
	} sections[] = {
		{ "global", "global", global_keys }, { "local", "local", local_keys },
		{ "rados", "rados", rados_keys }, { "tier", "tier", NULL },
		{ "image.NAME", "image", image_keys },
	};
	struct tierd_config *c = NULL;
	int r = -ENOENT;

	memset(out, 0, sizeof(*out));
	for (size_t s = 0; s < sizeof(sections) / sizeof(sections[0]); s++) {
		const struct kdesc *k = sections[s].keys;
		size_t n = 0;

		if (!k) {
			if (tier_key(i, out)) {
				out->section = sections[s].section;
				return 0;
			}
			while (tier_key(n, out))
				n++;
			memset(out, 0, sizeof(*out));
			i -= n;
			continue;
		}
		while (k[n].name)
			n++;
		if (i >= n) {
			i -= n;
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (!c)
			return -ENOMEM;
		tierd_config_defaults(c);
		out->section = sections[s].section;
		out->key = k[i].name;
		key_text(c, &k[i], out->def, sizeof(out->def), out->allowed, sizeof(out->allowed));
		out->live = key_is_live(sections[s].live_as, out->key);
		r = 0;
		break;
	}
	tierd_config_free(c);
	return r;
}
