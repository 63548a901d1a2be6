/* SPDX-License-Identifier: MIT */
/*
 * gen.c - fio-compatible random block generators (uniform, zipf, pareto)
 * and request streams for tier-sim and tier-bench.  It decides which block
 * index and which direction the next request has, reproducing fio's
 * arithmetic (taus88, zipf/pareto inverse CDF, rank hashing) so that
 * distribution shapes match what fio users measure.  It must never read
 * the clock or any global state: the same seed gives the same stream.
 */
#include "gen.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GEN_ZIPF_MAX_TERMS 10000000ull   /* fio's ZIPF_MAX_GEN */
#define GEN_HASH_MUL_64    0x61c8864680b583ebull   /* fio >= 3.x __hash_u64 (GOLDEN_RATIO_64) */
#define GEN_RAND32_MAX     4294967295.0

/* ---- taus88: fio lib/rand.c ---- */

static uint32_t taus_min(uint32_t x, uint32_t m)
{
	return x < m ? x + m : x;
}

void gen_taus88_seed(struct gen_taus88 *t, uint32_t seed)
{
	/*
	 * fio writes the LCG start as (2^31)+(2^17)+(2^7), which C reads
	 * as XORs: 29 + 19 + 5 = 53.  Kept, so that seeds line up.
	 */
	const uint32_t start = 53;

	t->s1 = taus_min(start * 69069u ^ seed, 1);
	t->s2 = taus_min(t->s1 * 69069u ^ seed, 7);
	t->s3 = taus_min(t->s2 * 69069u ^ seed, 15);
	for (int i = 0; i < 6; i++)
		(void)gen_taus88_next(t);
}

uint32_t gen_taus88_next(struct gen_taus88 *t)
{
	t->s1 = ((t->s1 & 4294967294u) << 12) ^ (((t->s1 << 13) ^ t->s1) >> 19);
	t->s2 = ((t->s2 & 4294967288u) << 4) ^ (((t->s2 << 2) ^ t->s2) >> 25);
	t->s3 = ((t->s3 & 4294967280u) << 17) ^ (((t->s3 << 3) ^ t->s3) >> 11);
	return t->s1 ^ t->s2 ^ t->s3;
}

/* ---- distributions: fio lib/zipf.c ---- */

static int parse_double(const char *s, double *out)
{
	char *end = NULL;

	errno = 0;
	*out = strtod(s, &end);
	if (errno || end == s || *end != '\0' || !isfinite(*out))
		return -EINVAL;
	return 0;
}

static int check_param(enum gen_dist_type type, double param)
{
	if (type == GEN_DIST_ZIPF && (param <= 0.0 || param == 1.0))
		return -EINVAL;
	if (type == GEN_DIST_PARETO && (param <= 0.0 || param >= 1.0))
		return -EINVAL;
	return 0;
}

int gen_dist_parse(const char *s, enum gen_dist_type *type, double *param)
{
	const char *colon = strchr(s, ':');
	size_t nlen = colon ? (size_t)(colon - s) : strlen(s);

	*param = 0.0;
	if (nlen == 4 && !strncmp(s, "zipf", 4))
		*type = GEN_DIST_ZIPF;
	else if (nlen == 6 && !strncmp(s, "pareto", 6))
		*type = GEN_DIST_PARETO;
	else if ((nlen == 7 && !strncmp(s, "uniform", 7)) ||
		 (nlen == 6 && !strncmp(s, "random", 6)))
		*type = GEN_DIST_UNIFORM;
	else if (nlen == 3 && !strncmp(s, "seq", 3))
		*type = GEN_DIST_SEQ;
	else
		return -EINVAL;

	if (*type == GEN_DIST_ZIPF || *type == GEN_DIST_PARETO) {
		if (!colon || parse_double(colon + 1, param) < 0)
			return -EINVAL;
	} else if (colon) {
		return -EINVAL;
	}
	return check_param(*type, *param);
}

int gen_dist_init(struct gen_dist *d, enum gen_dist_type type, double param,
		  uint64_t nranges, uint32_t seed)
{
	if (nranges == 0 || check_param(type, param) < 0)
		return -EINVAL;
	memset(d, 0, sizeof(*d));
	d->type = type;
	d->nranges = nranges;
	d->param = param;
	gen_taus88_seed(&d->rand, seed);
	if (type == GEN_DIST_ZIPF || type == GEN_DIST_PARETO)
		d->rand_off = gen_taus88_next(&d->rand);

	if (type == GEN_DIST_ZIPF) {
		uint64_t terms = nranges < GEN_ZIPF_MAX_TERMS ? nranges : GEN_ZIPF_MAX_TERMS;

		d->zeta2 = pow(1.0, param) + pow(0.5, param);
		for (uint64_t i = 0; i < terms; i++)
			d->zetan += pow(1.0 / (double)(i + 1), param);
	} else if (type == GEN_DIST_PARETO) {
		d->pareto_pow = log(param) / log(1.0 - param);
	}
	return 0;
}

void gen_dist_set_center(struct gen_dist *d, double center)
{
	if (center >= 0.0 && center <= 1.0)
		d->rand_off = (uint64_t)((double)d->nranges * center);
}

static uint64_t scatter(const struct gen_dist *d, uint64_t rank)
{
	if (!d->disable_hash)
		rank *= GEN_HASH_MUL_64;   /* wraps mod 2^64 */
	return (rank + d->rand_off) % d->nranges;
}

static uint64_t zipf_next(struct gen_dist *d)
{
	double theta = d->param;
	double n = (double)d->nranges;
	double alpha = 1.0 / (1.0 - theta);
	double eta = (1.0 - pow(2.0 / n, 1.0 - theta)) / (1.0 - d->zeta2 / d->zetan);
	double u = (double)gen_taus88_next(&d->rand) / GEN_RAND32_MAX;
	double z = u * d->zetan;
	uint64_t val;

	if (z < 1.0)
		val = 1;
	else if (z < 1.0 + pow(0.5, theta))
		val = 2;
	else
		val = 1 + (uint64_t)(n * pow(eta * u - eta + 1.0, alpha));
	return scatter(d, val - 1);
}

static uint64_t pareto_next(struct gen_dist *d)
{
	double u = (double)gen_taus88_next(&d->rand) / GEN_RAND32_MAX;
	uint64_t rank = (uint64_t)((double)(d->nranges - 1) * pow(u, d->pareto_pow));

	return scatter(d, rank);
}

uint64_t gen_dist_next(struct gen_dist *d)
{
	uint64_t v;

	switch (d->type) {
	case GEN_DIST_ZIPF:
		return zipf_next(d);
	case GEN_DIST_PARETO:
		return pareto_next(d);
	case GEN_DIST_SEQ:
		v = d->seq_next;
		d->seq_next = (v + 1) % d->nranges;
		return v;
	case GEN_DIST_UNIFORM:
	default:
		v = (uint64_t)((double)d->nranges *
			       ((double)gen_taus88_next(&d->rand) / (GEN_RAND32_MAX + 1.0)));
		return v < d->nranges ? v : d->nranges - 1;
	}
}

/* ---- fio-genzipf style analysis ---- */

static int cmp_u64_asc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_u64_desc(const void *a, const void *b)
{
	return cmp_u64_asc(b, a);
}

int gen_hit_counts(struct gen_dist *d, uint64_t nsamples, uint64_t **counts,
		   size_t *ncounts)
{
	uint64_t *s = NULL, *c = NULL;
	size_t n = 0;
	int ret = -ENOMEM;

	*counts = NULL;
	*ncounts = 0;
	s = malloc((nsamples ? nsamples : 1) * sizeof(*s));
	c = malloc((nsamples ? nsamples : 1) * sizeof(*c));
	if (!s || !c)
		goto out;
	for (uint64_t i = 0; i < nsamples; i++)
		s[i] = gen_dist_next(d);
	qsort(s, nsamples, sizeof(*s), cmp_u64_asc);
	for (uint64_t i = 0; i < nsamples; i++) {
		if (i == 0 || s[i] != s[i - 1])
			c[n++] = 0;
		c[n - 1]++;
	}
	qsort(c, n, sizeof(*c), cmp_u64_desc);
	*counts = c;
	*ncounts = n;
	c = NULL;
	ret = 0;
out:
	free(s);
	free(c);
	return ret;
}

double gen_top_share(const uint64_t *counts, size_t ncounts, uint64_t total,
		     unsigned buckets, unsigned upto_bucket)
{
	size_t step, limit;
	uint64_t sum = 0;

	if (!ncounts || !buckets || !total)
		return 0.0;
	step = (ncounts - 1) / buckets + 1;   /* fio-genzipf's interval_step */
	limit = step * upto_bucket;
	if (limit > ncounts)
		limit = ncounts;
	for (size_t k = 0; k < limit; k++)
		sum += counts[k];
	return (double)sum / (double)total;
}

/* ---- request streams ---- */

int gen_parse_rw(const char *s, uint32_t *write_pct)
{
	const char *colon;
	char *end = NULL;
	unsigned long v;

	if (!strcmp(s, "read") || !strcmp(s, "randread")) {
		*write_pct = 0;
		return 0;
	}
	if (!strcmp(s, "write") || !strcmp(s, "randwrite")) {
		*write_pct = 100;
		return 0;
	}
	colon = strchr(s, ':');
	if (!colon || !((colon - s == 6 && !strncmp(s, "randrw", 6)) ||
			(colon - s == 2 && !strncmp(s, "rw", 2))))
		return -EINVAL;
	errno = 0;
	v = strtoul(colon + 1, &end, 10);
	if (errno || end == colon + 1 || *end != '\0' || v > 100)
		return -EINVAL;
	*write_pct = (uint32_t)v;
	return 0;
}

int gen_parse_pattern(const char *s, enum gen_pattern *out)
{
	static const char *const names[] = { "plain", "hotscan", "shift", "log", "vms", "loop" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcmp(s, names[i])) {
			*out = (enum gen_pattern)i;
			return 0;
		}
	}
	return -EINVAL;
}

int gen_workload_init(struct gen_workload *w, const struct gen_workload_opts *o)
{
	uint64_t nranges, dn;
	int ret;

	if (!o->bs || o->size < o->bs || o->write_pct > 100 || o->hot_pct > 99 ||
	    o->parts > GEN_MAX_PARTS || (unsigned)o->pattern > GEN_PAT_LOOP)
		return -EINVAL;
	memset(w, 0, sizeof(*w));
	w->o = *o;
	if (!w->o.hot_pct)
		w->o.hot_pct = 10;
	if (!w->o.period)
		w->o.period = 50000;
	if (!w->o.scan_len)
		w->o.scan_len = w->o.period / 5;
	if (!w->o.parts)
		w->o.parts = 20;
	/* fio: nranges = ceil(size / min_bs); keep every request inside size */
	nranges = o->size / o->bs;
	w->hot_blocks = nranges * w->o.hot_pct / 100;
	if (!w->hot_blocks)
		w->hot_blocks = 1;
	dn = o->pattern == GEN_PAT_HOTSCAN || o->pattern == GEN_PAT_LOG ? w->hot_blocks : nranges;
	if (o->pattern == GEN_PAT_LOG && w->hot_blocks >= nranges)
		return -EINVAL;   /* no room for the log */
	if (o->pattern == GEN_PAT_LOOP && w->o.period > nranges)
		return -EINVAL;   /* more positions than blocks */
	if (o->pattern == GEN_PAT_VMS) {
		w->part_blocks = nranges / w->o.parts;
		if (!w->part_blocks)
			return -EINVAL;
		dn = w->part_blocks;
		w->parts = calloc(w->o.parts, sizeof(*w->parts));
		if (!w->parts)
			return -ENOMEM;
		for (uint32_t i = 0; i < w->o.parts; i++) {
			ret = gen_dist_init(&w->parts[i], o->type, o->param, dn, o->seed + i);
			if (ret < 0) {
				gen_workload_free(w);
				return ret;
			}
		}
		gen_taus88_seed(&w->pick, o->seed ^ 0x27d4eb2fu);
	}
	ret = gen_dist_init(&w->dist, o->type, o->param, dn, o->seed);
	if (ret < 0) {
		gen_workload_free(w);
		return ret;
	}
	gen_taus88_seed(&w->rw, o->seed ^ 0x5bd1e995u);
	return 0;
}

void gen_workload_free(struct gen_workload *w)
{
	free(w->parts);
	w->parts = NULL;
}

static bool draw_write(struct gen_workload *w)
{
	uint32_t read_pct = 100 - w->o.write_pct;
	uint32_t r, v;

	if (read_pct == 0)
		return true;
	if (read_pct == 100)
		return false;
	/* fio's rand_between(rwmix_state, 1, 100) <= rwmix_read -> read */
	r = gen_taus88_next(&w->rw);
	v = 1 + (uint32_t)(100.0 * ((double)r / (GEN_RAND32_MAX + 1.0)));
	return v > read_pct;
}

void gen_workload_next(struct gen_workload *w, struct gen_req *out)
{
	uint64_t nranges = w->o.size / w->o.bs, blk, i = w->n++;

	out->len = w->o.bs;
	switch (w->o.pattern) {
	case GEN_PAT_HOTSCAN:
		if (i % w->o.period >= w->o.period - (w->o.scan_len < w->o.period ?
						       w->o.scan_len : w->o.period)) {
			out->is_write = false;   /* a scan reads */
			out->off = (w->scan_pos++ % nranges) * w->o.bs;
			return;
		}
		break;
	case GEN_PAT_SHIFT:
		if (i && i % w->o.period == 0) {
			/* the golden ratio walks the hot spot evenly over the target */
			w->phase++;
			gen_dist_set_center(&w->dist, fmod(0.6180339887 * (double)w->phase, 1.0));
		}
		break;
	case GEN_PAT_LOG:
		if (i % 2 == 1) {
			out->is_write = true;
			out->off = (w->hot_blocks + w->log_pos++ % (nranges - w->hot_blocks)) * w->o.bs;
			return;
		}
		break;
	case GEN_PAT_VMS: {
		uint32_t part = (uint32_t)((double)w->o.parts *
					   ((double)gen_taus88_next(&w->pick) / (GEN_RAND32_MAX + 1.0)));

		if (part >= w->o.parts)
			part = w->o.parts - 1;
		out->is_write = draw_write(w);
		blk = (uint64_t)part * w->part_blocks + gen_dist_next(&w->parts[part]);
		out->off = blk * w->o.bs;
		return;
	}
	case GEN_PAT_LOOP: {
		uint64_t stride = nranges / w->o.period;

		out->is_write = draw_write(w);
		out->off = ((i % w->o.period) * stride + (i / w->o.period) % stride) * w->o.bs;
		return;
	}
	case GEN_PAT_PLAIN:
	default:
		break;
	}
	out->is_write = draw_write(w);
	out->off = gen_dist_next(&w->dist) * w->o.bs;
}
