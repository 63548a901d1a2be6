/* SPDX-License-Identifier: MIT */
/*
 * params.c - the [tier] parameter table: defaults, text <-> value with units,
 * range and cross-field checks.  It decides what a valid tier configuration
 * is and how each value is spelt, so the config file, `tierctl config set`
 * and the engine agree; it never applies anything to a running engine and
 * never prints (errors go into the caller's buffer).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tier/params.h"

enum pkind { K_U64, K_BYTES, K_MS, K_RATIO, K_ENUM };

#define KIND_U64 K_U64
#define KIND_BYTES K_BYTES
#define KIND_MS K_MS
#define KIND_RATIO K_RATIO

struct pdesc {
	const char *name;
	enum pkind kind;
	size_t off;
	uint64_t def, lo, hi;          /* integer kinds */
	double ddef, dlo, dhi;         /* K_RATIO */
	const char *const *names;      /* K_ENUM: index = value */
	size_t n_names;
};

static const char *const mode_names[] = {"writeback", "readproxy", "proxy", "readonly", "none"};
static const char *const gran_names[] = {"object", "extent"};
static const char *const evict_names[] = {"hitset", "s3fifo", "lru", "arc"};
static const char *const admission_names[] = {"recency", "tinylfu"};
static const char *const hitset_type_names[] = {"bloom"};
static const char *const wmiss_names[] = {"proxy", "promote"};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define OFF_NONE ((size_t)-1)

#define PDESC_U(n, kind, d, l, h) \
	{#n, KIND_##kind, offsetof(struct tier_params, n), (d), (l), (h), 0, 0, 0, NULL, 0},
#define PDESC_D(n, kind, d, l, h) \
	{#n, KIND_##kind, offsetof(struct tier_params, n), 0, 0, 0, (d), (l), (h), NULL, 0},
#define PDESC_E(n, arr, d) {#n, K_ENUM, offsetof(struct tier_params, n), (d), 0, 0, 0, 0, 0, arr, NELEM(arr)},

static const struct pdesc table[] = {
	PDESC_E(cache_mode, mode_names, TIER_MODE_WRITEBACK)
	/* hit_set_type has one value and no field: accepted for Ceph compatibility. */
	{"hit_set_type", K_ENUM, OFF_NONE, 0, 0, 0, 0, 0, 0, hitset_type_names, NELEM(hitset_type_names)},
	PDESC_E(promote_granularity, gran_names, TIER_GRAN_EXTENT)
	PDESC_E(evict_policy, evict_names, TIER_EVICT_LRU)
	PDESC_E(write_miss, wmiss_names, TIER_WMISS_PROXY)
	PDESC_E(admission, admission_names, TIER_ADMIT_RECENCY)
	TIER_PARAMS_U(PDESC_U)
	TIER_PARAMS_D(PDESC_D)
};

static const struct pdesc *find(const char *key)
{
	for (size_t i = 0; i < NELEM(table); i++)
		if (strcmp(table[i].name, key) == 0)
			return &table[i];
	return NULL;
}

static uint64_t *u64_field(struct tier_params *p, const struct pdesc *d)
{
	return (uint64_t *)((char *)p + d->off);
}

static uint64_t u64_get(const struct tier_params *p, const struct pdesc *d)
{
	return *(const uint64_t *)((const char *)p + d->off);
}

static double *dbl_field(struct tier_params *p, const struct pdesc *d)
{
	return (double *)((char *)p + d->off);
}

static double dbl_get(const struct tier_params *p, const struct pdesc *d)
{
	return *(const double *)((const char *)p + d->off);
}

/* Enum fields are C enums; all three have int-compatible storage. */
static int enum_get(const struct tier_params *p, const struct pdesc *d)
{
	if (d->off == OFF_NONE)
		return 0;
	return *(const int *)((const char *)p + d->off);
}

static void enum_set(struct tier_params *p, const struct pdesc *d, int v)
{
	if (d->off != OFF_NONE)
		*(int *)((char *)p + d->off) = v;
}

_Static_assert(sizeof(enum tier_cache_mode) == sizeof(int), "enum storage");
_Static_assert(sizeof(enum tier_granularity) == sizeof(int), "enum storage");
_Static_assert(sizeof(enum tier_evict_policy) == sizeof(int), "enum storage");
_Static_assert(sizeof(enum tier_write_miss) == sizeof(int), "enum storage");
_Static_assert(sizeof(enum tier_admission) == sizeof(int), "enum storage");

void tier_params_default(struct tier_params *p)
{
	memset(p, 0, sizeof(*p));
	for (size_t i = 0; i < NELEM(table); i++) {
		const struct pdesc *d = &table[i];
		if (d->kind == K_ENUM)
			enum_set(p, d, (int)d->def);
		else if (d->kind == K_RATIO)
			*dbl_field(p, d) = d->ddef;
		else
			*u64_field(p, d) = d->def;
	}
}

/* ---- presets ---- */

/*
 * Named sets of [tier] values applied over the defaults (tier_preset in the
 * config).  "tierd" is the defaults themselves: extent-granular admission
 * (a write miss lands in the cache without reading base), writes admitted
 * on first touch, reads on the second once the cache is near its full
 * target (on the first while it has room: admit_when_room).  "ceph" is
 * Ceph's cache tiering as of its last release: whole-object promotion with
 * proxy write, recency 1 for both at any fullness, its promotion throttle,
 * hitset eviction.  "promote-always" is Ceph before proxy write: every
 * miss waits for a whole-object promotion.
 * tierd orders its eviction by LRU (docs/BENCHMARKS.md,
 * "The policy suite"; ARC before); the Ceph presets keep Ceph's temperature.
 */
static const struct {
	const char *name, *what;
	const char *kv[11];
} presets[] = {
	{ "tierd", "the defaults: extent admission, writes on first touch, reads on second under pressure (first with room), LRU order, a clock over extents",
	  { NULL } },
	{ "ceph", "Ceph's cache tiering: whole-object promotion, proxy write, recency 1, 5 MiB/s + 25/s throttle",
	  { "promote_granularity=object", "write_miss=proxy", "min_write_recency_for_promote=1",
	    "min_read_recency_for_promote=1", "promote_max_bytes_sec=5M",
	    "promote_max_objects_sec=25", "evict_policy=hitset", "agent_evict_dirty=0",
	    "admission=recency", "admit_when_room=0", NULL } },
	{ "promote-always", "Ceph without proxy write: every miss promotes the whole object first",
	  { "promote_granularity=object", "write_miss=promote", "min_write_recency_for_promote=0",
	    "min_read_recency_for_promote=0", "promote_max_bytes_sec=0",
	    "promote_max_objects_sec=0", "evict_policy=hitset", "agent_evict_dirty=0",
	    "admission=recency", "admit_when_room=0", NULL } },
};

const char *tier_params_preset_info(size_t i, const char **what)
{
	if (i >= NELEM(presets))
		return NULL;
	if (what)
		*what = presets[i].what;
	return presets[i].name;
}

int tier_params_preset(struct tier_params *p, const char *name, char *err, size_t errlen)
{
	char allowed[128] = "", key[64], msg[160];

	for (size_t i = 0; i < NELEM(presets); i++) {
		if (strcmp(name, presets[i].name))
			continue;
		for (const char *const *kv = presets[i].kv; *kv; kv++) {
			const char *eq = strchr(*kv, '=');

			snprintf(key, sizeof(key), "%.*s", (int)(eq - *kv), *kv);
			if (tier_params_set(p, key, eq + 1, msg, sizeof(msg)) < 0)
				return -EINVAL;   /* a bad table entry: cannot happen */
		}
		return 0;
	}
	for (size_t i = 0; i < NELEM(presets); i++)
		snprintf(allowed + strlen(allowed), sizeof(allowed) - strlen(allowed), "%s%s",
			 i ? ", " : "", presets[i].name);
	if (errlen)
		snprintf(err, errlen, "unknown preset '%s' (allowed: %s)", name, allowed);
	return -EINVAL;
}

/* ---- unit parsers ---- */

static const char *skip_space(const char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	return s;
}

/* Trailing part after the number, with surrounding blanks removed, into buf. */
static int suffix_of(const char *s, char *buf, size_t len)
{
	s = skip_space(s);
	size_t n = strlen(s);
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		n--;
	if (n >= len)
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return 0;
}

/*
 * "123", "1.5": integer part and fraction as num/den (den a power of ten).
 * Rejects signs, exponents and empty input.  *end points past the digits.
 */
static int parse_decimal(const char *s, uint64_t *ip, uint64_t *fnum, uint64_t *fden,
			 const char **end)
{
	uint64_t v = 0, fn = 0, fd = 1;
	bool any = false;

	s = skip_space(s);
	while (isdigit((unsigned char)*s)) {
		unsigned dgt = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - dgt) / 10)
			return -ERANGE;
		v = v * 10 + dgt;
		any = true;
		s++;
	}
	if (*s == '.') {
		s++;
		while (isdigit((unsigned char)*s)) {
			if (fd < 1000000000000000000ull) {
				fn = fn * 10 + (unsigned)(*s - '0');
				fd *= 10;
			}
			any = true;
			s++;
		}
	}
	if (!any)
		return -EINVAL;
	*ip = v;
	*fnum = fn;
	*fden = fd;
	*end = s;
	return 0;
}

/* ip.frac * mult, which must come out whole. */
static int scale(uint64_t ip, uint64_t fn, uint64_t fd, uint64_t mult, uint64_t *out)
{
	unsigned __int128 whole = (unsigned __int128)ip * mult;
	unsigned __int128 frac = (unsigned __int128)fn * mult;

	if (frac % fd != 0)
		return -EINVAL;
	whole += frac / fd;
	if (whole > UINT64_MAX)
		return -ERANGE;
	*out = (uint64_t)whole;
	return 0;
}

int tier_parse_u64(const char *s, uint64_t *out)
{
	uint64_t ip, fn, fd;
	const char *end;
	char suf[8];
	int r;

	if (!s)
		return -EINVAL;
	r = parse_decimal(s, &ip, &fn, &fd, &end);
	if (r < 0)
		return r;
	if (fd != 1 || strchr(s, '.'))
		return -EINVAL;
	if (suffix_of(end, suf, sizeof(suf)) < 0 || suf[0] != '\0')
		return -EINVAL;
	*out = ip;
	return 0;
}

int tier_parse_bytes(const char *s, uint64_t *out)
{
	static const char units[] = "KMGTPE";
	uint64_t ip, fn, fd, mult = 1;
	const char *end, *p;
	char suf[16];
	int r;

	if (!s)
		return -EINVAL;
	r = parse_decimal(s, &ip, &fn, &fd, &end);
	if (r < 0)
		return r;
	if (suffix_of(end, suf, sizeof(suf)) < 0)
		return -EINVAL;
	p = suf;
	if (*p) {
		const char *u = strchr(units, toupper((unsigned char)*p));
		if (u) {
			for (const char *q = units; q <= u; q++)
				mult <<= 10;
			p++;
			if (*p == 'i')   /* KiB, MiB: same powers of two */
				p++;
		}
		if (*p == 'B' || *p == 'b')
			p++;
		if (*p)
			return -EINVAL;
	}
	return scale(ip, fn, fd, mult, out);
}

int tier_parse_ms(const char *s, uint64_t *out)
{
	static const struct { const char *suf; uint64_t ms; } units[] = {
		{"", 1000}, {"ms", 1}, {"s", 1000}, {"sec", 1000}, {"m", 60000},
		{"min", 60000}, {"h", 3600000}, {"d", 86400000},
	};
	uint64_t ip, fn, fd;
	const char *end;
	char suf[8];
	int r;

	if (!s)
		return -EINVAL;
	r = parse_decimal(s, &ip, &fn, &fd, &end);
	if (r < 0)
		return r;
	if (suffix_of(end, suf, sizeof(suf)) < 0)
		return -EINVAL;
	for (size_t i = 0; i < NELEM(units); i++)
		if (strcasecmp(suf, units[i].suf) == 0)
			return scale(ip, fn, fd, units[i].ms, out);
	return -EINVAL;
}

int tier_parse_bool(const char *s, int *out)
{
	static const char *const t[] = {"true", "yes", "on", "1"};
	static const char *const f[] = {"false", "no", "off", "0"};
	char v[8];

	if (!s || suffix_of(s, v, sizeof(v)) < 0)
		return -EINVAL;
	for (size_t i = 0; i < NELEM(t); i++) {
		if (strcasecmp(v, t[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcasecmp(v, f[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	return -EINVAL;
}

/* "0.4", "40%" -> 0.4 */
static int parse_ratio(const char *s, double *out)
{
	char *end;
	double v;

	s = skip_space(s);
	if (!isdigit((unsigned char)*s) && *s != '.')
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !isfinite(v))
		return -EINVAL;
	end = (char *)skip_space(end);
	if (*end == '%') {
		v /= 100.0;
		end = (char *)skip_space(end + 1);
	}
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

/* ---- formatting ---- */

/* Largest exact binary unit: 4194304 -> "4M". */
static void fmt_bytes(uint64_t v, char *out, size_t len)
{
	static const char units[] = "KMGTPE";
	int u = -1;

	while (v != 0 && u < 5 && (v & 1023) == 0) {
		v >>= 10;
		u++;
	}
	if (u < 0)
		snprintf(out, len, "%llu", (unsigned long long)v);
	else
		snprintf(out, len, "%llu%c", (unsigned long long)v, units[u]);
}

static void fmt_ms(uint64_t v, char *out, size_t len)
{
	static const struct { const char *suf; uint64_t ms; } units[] = {
		{"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1},
	};
	if (v == 0) {
		snprintf(out, len, "0");
		return;
	}
	for (size_t i = 0; i < NELEM(units); i++) {
		if (v % units[i].ms == 0) {
			snprintf(out, len, "%llu%s", (unsigned long long)(v / units[i].ms),
				 units[i].suf);
			return;
		}
	}
}

static void fmt_double(double v, char *out, size_t len)
{
	snprintf(out, len, "%g", v);
	if (strtod(out, NULL) != v)
		snprintf(out, len, "%.17g", v);
}

static void fmt_value(const struct pdesc *d, uint64_t v, char *out, size_t len)
{
	if (d->kind == K_BYTES)
		fmt_bytes(v, out, len);
	else if (d->kind == K_MS)
		fmt_ms(v, out, len);
	else
		snprintf(out, len, "%llu", (unsigned long long)v);
}

/* Append s to out[len] at *n, truncating (always NUL-terminated when len > 0). */
static void append(char *out, size_t len, size_t *n, const char *s)
{
	size_t k = strlen(s);

	if (*n + 1 < len) {
		size_t room = len - *n - 1;

		memcpy(out + *n, s, k < room ? k : room);
		out[*n + (k < room ? k : room)] = '\0';
	}
	*n += k;
}

static void fmt_allowed(const struct pdesc *d, char *out, size_t len)
{
	char lo[32], hi[32];
	size_t n = 0;

	switch (d->kind) {
	case K_ENUM:
		out[0] = '\0';
		for (size_t i = 0; i < d->n_names; i++)
			n += (size_t)snprintf(out + n, n < len ? len - n : 0, "%s%s",
					      i ? "|" : "", d->names[i]);
		return;
	case K_RATIO:
		fmt_double(d->dlo, lo, sizeof(lo));
		fmt_double(d->dhi, hi, sizeof(hi));
		snprintf(out, len, "%s..%s", lo, hi);
		return;
	default:
		fmt_value(d, d->lo, lo, sizeof(lo));
		if (d->hi == UINT64_MAX) {
			snprintf(out, len, "%s or more%s", lo,
				 d->kind == K_BYTES ? ", units K/M/G/T" : "");
			return;
		}
		fmt_value(d, d->hi, hi, sizeof(hi));
		snprintf(out, len, "%s..%s%s", lo, hi,
			 d->kind == K_BYTES ? ", units K/M/G/T" :
			 d->kind == K_MS ? ", units ms/s/m/h, bare number = seconds" : "");
		return;
	}
}

/* ---- set / get ---- */

static int set_enum(struct tier_params *p, const struct pdesc *d, const char *value)
{
	char v[32];

	if (suffix_of(value, v, sizeof(v)) < 0)
		return -EINVAL;
	for (size_t i = 0; i < d->n_names; i++) {
		if (strcasecmp(v, d->names[i]) == 0) {
			enum_set(p, d, (int)i);
			return 0;
		}
	}
	return -EINVAL;
}

int tier_params_set(struct tier_params *p, const char *key, const char *value,
		    char *err, size_t errlen)
{
	const struct pdesc *d = key ? find(key) : NULL;
	char allowed[160];
	uint64_t u = 0;
	double x = 0;
	int r;

	if (!d) {
		size_t n = 0;

		append(err, errlen, &n, "unknown tier parameter (allowed: ");
		for (size_t i = 0; i < NELEM(table); i++) {
			if (i)
				append(err, errlen, &n, ", ");
			append(err, errlen, &n, table[i].name);
		}
		append(err, errlen, &n, ")");
		return -ENOENT;
	}
	if (!value) {
		r = -EINVAL;
		goto out;
	}
	switch (d->kind) {
	case K_ENUM:
		r = set_enum(p, d, value);
		break;
	case K_RATIO:
		r = parse_ratio(value, &x);
		if (r == 0 && (x < d->dlo || x > d->dhi))
			r = -ERANGE;
		if (r == 0)
			*dbl_field(p, d) = x;
		break;
	default:
		r = d->kind == K_BYTES ? tier_parse_bytes(value, &u) :
		    d->kind == K_MS ? tier_parse_ms(value, &u) : tier_parse_u64(value, &u);
		if (r == 0 && (u < d->lo || u > d->hi))
			r = -ERANGE;
		if (r == 0)
			*u64_field(p, d) = u;
		break;
	}
out:
	if (r < 0) {
		fmt_allowed(d, allowed, sizeof(allowed));
		snprintf(err, errlen, "%s '%s' (allowed: %s)",
			 r == -ERANGE ? "out of range" : "bad value", value ? value : "",
			 allowed);
	}
	return r;
}

static void get_desc(const struct tier_params *p, const struct pdesc *d, char *out, size_t outlen)
{
	switch (d->kind) {
	case K_ENUM: {
		int v = enum_get(p, d);
		snprintf(out, outlen, "%s",
			 v >= 0 && (size_t)v < d->n_names ? d->names[v] : "invalid");
		break;
	}
	case K_RATIO:
		fmt_double(dbl_get(p, d), out, outlen);
		break;
	default:
		fmt_value(d, u64_get(p, d), out, outlen);
		break;
	}
}

int tier_params_get(const struct tier_params *p, const char *key, char *out, size_t outlen)
{
	const struct pdesc *d = key ? find(key) : NULL;

	if (!d)
		return -ENOENT;
	get_desc(p, d, out, outlen);
	return 0;
}

void tier_params_foreach(const struct tier_params *p,
			 void (*fn)(void *arg, const char *key, const char *value),
			 void *arg)
{
	char v[64];

	for (size_t i = 0; i < NELEM(table); i++) {
		get_desc(p, &table[i], v, sizeof(v));
		fn(arg, table[i].name, v);
	}
}

int tier_params_is_live(const char *key)
{
	if (!key || !find(key))
		return -ENOENT;
	return strcmp(key, "object_size") != 0 && strcmp(key, "extent_size") != 0;
}

int tier_params_info(size_t i, struct tier_param_info *out)
{
	struct tier_params p;

	if (i >= NELEM(table))
		return -ENOENT;
	tier_params_default(&p);
	out->key = table[i].name;
	get_desc(&p, &table[i], out->def, sizeof(out->def));
	fmt_allowed(&table[i], out->allowed, sizeof(out->allowed));
	out->live = tier_params_is_live(table[i].name) == 1;
	return 0;
}

void tier_format_bytes(uint64_t v, char *out, size_t len)
{
	fmt_bytes(v, out, len);
}

void tier_format_ms(uint64_t v, char *out, size_t len)
{
	fmt_ms(v, out, len);
}

static bool is_pow2(uint64_t v)
{
	return v != 0 && (v & (v - 1)) == 0;
}

static int check_enums(const struct tier_params *p, char *err, size_t errlen)
{
	for (size_t i = 0; i < NELEM(table); i++) {
		const struct pdesc *d = &table[i];
		int v = enum_get(p, d);
		if (d->kind == K_ENUM && (v < 0 || (size_t)v >= d->n_names)) {
			snprintf(err, errlen, "%s: invalid value %d", d->name, v);
			return -EINVAL;
		}
	}
	return 0;
}

static int check_ranges(const struct tier_params *p, char *err, size_t errlen)
{
	char allowed[160], v[64];

	for (size_t i = 0; i < NELEM(table); i++) {
		const struct pdesc *d = &table[i];
		bool bad;
		if (d->kind == K_ENUM)
			continue;
		if (d->kind == K_RATIO)
			bad = !(dbl_get(p, d) >= d->dlo && dbl_get(p, d) <= d->dhi);
		else
			bad = u64_get(p, d) < d->lo || u64_get(p, d) > d->hi;
		if (bad) {
			tier_params_get(p, d->name, v, sizeof(v));
			fmt_allowed(d, allowed, sizeof(allowed));
			snprintf(err, errlen, "%s: out of range '%s' (allowed: %s)", d->name, v,
				 allowed);
			return -ERANGE;
		}
	}
	return 0;
}

int tier_params_check(const struct tier_params *p, char *err, size_t errlen)
{
	int r = check_enums(p, err, errlen);

	if (r == 0)
		r = check_ranges(p, err, errlen);
	if (r < 0)
		return r;
#define FAIL(...)                                  \
	do {                                       \
		snprintf(err, errlen, __VA_ARGS__); \
		return -EINVAL;                    \
	} while (0)
	if (p->cache_target_dirty_ratio > p->cache_target_dirty_high_ratio)
		FAIL("cache_target_dirty_ratio (%g) must not exceed cache_target_dirty_high_ratio (%g)",
		     p->cache_target_dirty_ratio, p->cache_target_dirty_high_ratio);
	if (p->agent_max_low_ops > p->agent_max_ops)
		FAIL("agent_max_low_ops (%llu) must not exceed agent_max_ops (%llu)",
		     (unsigned long long)p->agent_max_low_ops,
		     (unsigned long long)p->agent_max_ops);
	if (!is_pow2(p->object_size))
		FAIL("object_size (%llu) must be a power of two",
		     (unsigned long long)p->object_size);
	if (!is_pow2(p->extent_size))
		FAIL("extent_size (%llu) must be a power of two",
		     (unsigned long long)p->extent_size);
	if (p->extent_size > p->object_size)
		FAIL("extent_size (%llu) must not exceed object_size (%llu)",
		     (unsigned long long)p->extent_size, (unsigned long long)p->object_size);
	/* Recency N looks at the current set and N-1 archived ones. */
	if (p->min_read_recency_for_promote > p->hit_set_count + 1)
		FAIL("min_read_recency_for_promote (%llu) must not exceed hit_set_count + 1 (%llu)",
		     (unsigned long long)p->min_read_recency_for_promote,
		     (unsigned long long)p->hit_set_count + 1);
	if (p->min_write_recency_for_promote > p->hit_set_count + 1)
		FAIL("min_write_recency_for_promote (%llu) must not exceed hit_set_count + 1 (%llu)",
		     (unsigned long long)p->min_write_recency_for_promote,
		     (unsigned long long)p->hit_set_count + 1);
	if (p->hit_set_search_last_n > p->hit_set_count)
		FAIL("hit_set_search_last_n (%llu) must not exceed hit_set_count (%llu)",
		     (unsigned long long)p->hit_set_search_last_n,
		     (unsigned long long)p->hit_set_count);
	if (p->cache_mode != TIER_MODE_NONE && p->target_max_bytes == 0 &&
	    p->target_max_objects == 0)
		FAIL("target_max_bytes or target_max_objects must be set when cache_mode is %s",
		     mode_names[p->cache_mode]);
#undef FAIL
	return 0;
}
