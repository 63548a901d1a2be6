/* SPDX-License-Identifier: MIT */
/*
 * libtier/hitset.c - Ceph-style HitSets: one bloom filter per hit_set_period
 * (the current set) plus up to hit_set_count archived ones, newest first.
 * This module decides whether an object key counts as "recent" (Ceph's
 * min_*_recency_for_promote rule), how warm it is (agent_estimate_temp), how
 * big the next period's filter must be (sized from the previous period's
 * unique inserts, as Ceph's hit_set_create does), and how an archived set
 * looks on disk.  It never does I/O, never prints and never keeps a key
 * itself: only bits.  The decoder must never trust a blob: every size is
 * checked before it is used.
 */
#include <endian.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "libtier/hash.h"
#include "libtier/hitset.h"
#include "tier/engine.h"

#define HS_MAX_COUNT     64u
_Static_assert(HS_MAX_COUNT + 1 == TIER_HITSET_MAX_SETS, "the current set + hit_set_count");
#define HS_MIN_CAPACITY  1024u            /* floor, like osd_hit_set_min_size */
#define HS_MAX_CAPACITY  (1ull << 22)     /* 4 Mi objects = 16 TiB of 4 MiB */
#define HS_MAX_K         16u
#define HS_MAX_BITS      (1ull << 31)     /* 256 MiB filter: refuse beyond */

#define HS_MAGIC         0x31534854u      /* "THS1" little-endian */
#define HS_FORMAT        1u

/*
 * On-disk record, all fields little-endian, followed by nbits/8 bytes of
 * filter (64-bit words, little-endian); the whole record is one zstd frame
 * with a content checksum.
 */
struct hs_wire {
	uint32_t magic;
	uint16_t version;
	uint16_t k;
	uint64_t start_ms;
	uint64_t end_ms;
	uint64_t inserts;
	uint64_t capacity;
	uint64_t seed;
	uint64_t nbits;
	uint64_t bits_set;
	uint64_t fpp_bits;        /* IEEE-754 double of the target fpp */
} __attribute__((packed));
_Static_assert(sizeof(struct hs_wire) == 72, "hitset wire header is 72 bytes");

struct hs_set {
	uint64_t *bits;
	uint64_t nbits;           /* multiple of 64 */
	uint64_t bits_set;
	uint64_t seed;
	uint64_t start_ms, end_ms;
	uint64_t inserts;         /* every insert, repeats included */
	uint64_t capacity;
	double fpp;
	unsigned k;
};

struct tier__hitsets {
	unsigned count;           /* archived sets kept */
	double fpp;               /* for the next set */
	uint64_t seq;             /* seeds distinct sets differently */
	struct hs_set *cur;
	struct hs_set *arch[HS_MAX_COUNT];   /* [0] = newest */
	unsigned narch;
};

/* Map a 64-bit hash onto [0, n) without a division (Lemire). */
static uint64_t reduce(uint64_t h, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)h * n) >> 64);
}

static void set_free(struct hs_set *s)
{
	if (!s)
		return;
	free(s->bits);
	free(s);
}

static struct hs_set *set_alloc(uint64_t nbits)
{
	struct hs_set *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->nbits = nbits;
	s->bits = calloc(nbits / 64, sizeof(uint64_t));
	if (!s->bits) {
		free(s);
		return NULL;
	}
	return s;
}

/* Optimal bloom geometry: m = -n ln p / ln2^2, k = m/n ln 2. */
static struct hs_set *set_new(uint64_t capacity, double fpp, uint64_t seed, uint64_t now_ms)
{
	struct hs_set *s;
	double m;
	uint64_t nbits;
	unsigned k;

	if (capacity < HS_MIN_CAPACITY)
		capacity = HS_MIN_CAPACITY;
	if (capacity > HS_MAX_CAPACITY)
		capacity = HS_MAX_CAPACITY;
	m = -(double)capacity * log(fpp) / (M_LN2 * M_LN2);
	nbits = ((uint64_t)ceil(m) + 63) & ~63ull;
	k = (unsigned)lround((double)nbits / (double)capacity * M_LN2);
	if (k < 1)
		k = 1;
	if (k > HS_MAX_K)
		k = HS_MAX_K;
	s = set_alloc(nbits);
	if (!s)
		return NULL;
	s->k = k;
	s->seed = seed;
	s->capacity = capacity;
	s->fpp = fpp;
	s->start_ms = now_ms;
	s->end_ms = now_ms;
	return s;
}

/* Kirsch-Mitzenmacher double hashing: bit_i = h1 + i*h2 over one 128-bit mix. */
static void set_hashes(const struct hs_set *s, uint64_t key, uint64_t *h1, uint64_t *h2)
{
	*h1 = tier__mix64(key ^ s->seed);
	*h2 = tier__mix64(*h1 ^ 0x9e3779b97f4a7c15ull) | 1;
}

static void set_insert(struct hs_set *s, uint64_t key)
{
	uint64_t h1, h2, h;

	set_hashes(s, key, &h1, &h2);
	h = h1;
	for (unsigned i = 0; i < s->k; i++, h += h2) {
		uint64_t b = reduce(h, s->nbits);
		uint64_t m = 1ull << (b & 63);

		if (!(s->bits[b >> 6] & m)) {
			s->bits[b >> 6] |= m;
			s->bits_set++;
		}
	}
	s->inserts++;
}

/*
 * Distinct keys inserted, from the fill (Swamidass & Baldi):
 * n = -(m/k) ln(1 - X/m).  Unlike counting inserts that set a new bit, it
 * stays unbiased when a period saw far more objects than its filter was
 * sized for.
 */
static uint64_t set_unique(const struct hs_set *s)
{
	double free_frac = 1.0 - (double)s->bits_set / (double)s->nbits;

	if (free_frac <= 0.0)
		return HS_MAX_CAPACITY;
	return (uint64_t)llround(-(double)s->nbits / s->k * log(free_frac));
}

static bool set_contains(const struct hs_set *s, uint64_t key)
{
	uint64_t h1, h2, h;

	set_hashes(s, key, &h1, &h2);
	h = h1;
	for (unsigned i = 0; i < s->k; i++, h += h2) {
		uint64_t b = reduce(h, s->nbits);

		if (!(s->bits[b >> 6] & (1ull << (b & 63))))
			return false;
	}
	return true;
}

static double sane_fpp(double fpp)
{
	if (!(fpp > 0.0) || fpp >= 1.0)
		return 0.05;
	if (fpp < 1e-9)
		return 1e-9;
	return fpp;
}

static void trim(struct tier__hitsets *hs)
{
	while (hs->narch > hs->count)
		set_free(hs->arch[--hs->narch]);
}

/* Push s as the newest archived set; drops the oldest beyond count. */
static void push_archived(struct tier__hitsets *hs, struct hs_set *s)
{
	if (hs->narch == HS_MAX_COUNT)
		set_free(hs->arch[--hs->narch]);
	memmove(&hs->arch[1], &hs->arch[0], hs->narch * sizeof(hs->arch[0]));
	hs->arch[0] = s;
	hs->narch++;
	trim(hs);
}

int tier__hitsets_create(unsigned count, double fpp, uint64_t first_capacity,
			 uint64_t now_ms, struct tier__hitsets **out)
{
	struct tier__hitsets *hs = NULL;
	int rc = 0;

	*out = NULL;
	if (count > HS_MAX_COUNT || !(fpp > 0.0 && fpp < 1.0)) {
		rc = -EINVAL;
		goto out;
	}
	hs = calloc(1, sizeof(*hs));
	if (!hs) {
		rc = -ENOMEM;
		goto out;
	}
	hs->count = count;
	hs->fpp = fpp;
	hs->cur = set_new(first_capacity, fpp, tier__mix64(now_ms ^ ++hs->seq), now_ms);
	if (!hs->cur) {
		rc = -ENOMEM;
		goto out;
	}
	*out = hs;
	hs = NULL;
out:
	tier__hitsets_destroy(hs);
	return rc;
}

void tier__hitsets_destroy(struct tier__hitsets *hs)
{
	if (!hs)
		return;
	for (unsigned i = 0; i < hs->narch; i++)
		set_free(hs->arch[i]);
	set_free(hs->cur);
	free(hs);
}

void tier__hitsets_configure(struct tier__hitsets *hs, unsigned count, double fpp)
{
	hs->count = count > HS_MAX_COUNT ? HS_MAX_COUNT : count;
	hs->fpp = sane_fpp(fpp);
	trim(hs);
}

void tier__hitsets_insert(struct tier__hitsets *hs, uint64_t key)
{
	set_insert(hs->cur, key);
}

bool tier__hitsets_recent(const struct tier__hitsets *hs, uint64_t key, unsigned n)
{
	unsigned have;

	if (n == 0)
		return true;
	if (!set_contains(hs->cur, key))
		return false;
	/* PrimaryLogPG::maybe_promote: walk newest-first, stop at the first miss */
	have = 1;
	for (unsigned i = 0; i < hs->narch && have < n; i++) {
		if (!set_contains(hs->arch[i], key))
			break;
		have++;
	}
	return have >= n;
}

uint32_t tier__hitsets_temperature(const struct tier__hitsets *hs, uint64_t key,
				   unsigned decay_rate, unsigned search_last_n)
{
	/* pg_pool_t::calc_grade_table: an unsigned, truncated at every step */
	double keep = 1.0 - (decay_rate > 100 ? 100 : decay_rate) / 100.0;
	uint32_t grade = 1000000;
	uint32_t temp = 0;

	if (set_contains(hs->cur, key))
		temp = 1000000;
	for (unsigned i = 0; i < hs->narch && search_last_n > 0; i++) {
		grade = (uint32_t)(grade * keep);
		if (set_contains(hs->arch[i], key)) {
			temp += grade;
			search_last_n--;
		}
	}
	return temp;
}

int tier__hitsets_maybe_rotate(struct tier__hitsets *hs, uint64_t now_ms, uint64_t period_ms)
{
	struct hs_set *next;
	uint64_t dur, cap;

	if (now_ms < hs->cur->start_ms || now_ms - hs->cur->start_ms < period_ms)
		return 0;
	/*
	 * Ceph's hit_set_create: the next target is the unique inserts of the
	 * closing set scaled to one period (a late rotation saw more time).
	 */
	dur = now_ms - hs->cur->start_ms;
	cap = set_unique(hs->cur);
	if (dur > period_ms && period_ms > 0)
		cap = (uint64_t)((double)cap * (double)period_ms / (double)dur);
	next = set_new(cap, hs->fpp, tier__mix64(now_ms ^ ++hs->seq), now_ms);
	if (!next)
		return -ENOMEM;
	hs->cur->end_ms = now_ms;
	push_archived(hs, hs->cur);   /* with hit_set_count 0 this frees it */
	hs->cur = next;
	return 1;
}

unsigned tier__hitsets_archived(const struct tier__hitsets *hs)
{
	return hs->narch;
}

static void wire_fill(struct hs_wire *w, const struct hs_set *s)
{
	uint64_t fb;

	memcpy(&fb, &s->fpp, sizeof(fb));
	w->magic = htole32(HS_MAGIC);
	w->version = htole16(HS_FORMAT);
	w->k = htole16((uint16_t)s->k);
	w->start_ms = htole64(s->start_ms);
	w->end_ms = htole64(s->end_ms);
	w->inserts = htole64(s->inserts);
	w->capacity = htole64(s->capacity);
	w->seed = htole64(s->seed);
	w->nbits = htole64(s->nbits);
	w->bits_set = htole64(s->bits_set);
	w->fpp_bits = htole64(fb);
}

int tier__hitsets_encode_newest(const struct tier__hitsets *hs, void **blob, size_t *len,
				uint64_t *start_ms)
{
	const struct hs_set *s;
	unsigned char *raw = NULL;
	void *z = NULL;
	ZSTD_CCtx *cctx = NULL;
	struct hs_wire w;
	size_t rawlen, bound, zlen;
	int rc = 0;

	*blob = NULL;
	*len = 0;
	if (hs->narch == 0)
		return -ENOENT;
	s = hs->arch[0];
	rawlen = sizeof(w) + s->nbits / 8;
	raw = malloc(rawlen);
	bound = ZSTD_compressBound(rawlen);
	z = malloc(bound);
	cctx = ZSTD_createCCtx();
	if (!raw || !z || !cctx) {
		rc = -ENOMEM;
		goto out;
	}
	wire_fill(&w, s);
	memcpy(raw, &w, sizeof(w));
	for (uint64_t i = 0; i < s->nbits / 64; i++) {
		uint64_t le = htole64(s->bits[i]);

		memcpy(raw + sizeof(w) + i * 8, &le, 8);
	}
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 3);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	zlen = ZSTD_compress2(cctx, z, bound, raw, rawlen);
	if (ZSTD_isError(zlen)) {
		rc = -EIO;
		goto out;
	}
	*blob = z;
	*len = zlen;
	if (start_ms)
		*start_ms = s->start_ms;
	z = NULL;
out:
	ZSTD_freeCCtx(cctx);
	free(z);
	free(raw);
	return rc;
}

static uint64_t popcount_words(const uint64_t *w, uint64_t n)
{
	uint64_t c = 0;

	for (uint64_t i = 0; i < n; i++)
		c += (uint64_t)__builtin_popcountll(w[i]);
	return c;
}

/* Validate a decompressed record and build a set from it. */
static int decode_record(const unsigned char *raw, size_t rawlen, struct hs_set **out)
{
	struct hs_set *s = NULL;
	struct hs_wire w;
	uint64_t nbits, fb;
	double fpp;
	int rc = -EINVAL;

	*out = NULL;
	if (rawlen < sizeof(w))
		goto out;
	memcpy(&w, raw, sizeof(w));
	nbits = le64toh(w.nbits);
	fb = le64toh(w.fpp_bits);
	memcpy(&fpp, &fb, sizeof(fpp));
	if (le32toh(w.magic) != HS_MAGIC || le16toh(w.version) != HS_FORMAT)
		goto out;
	if (nbits < 64 || nbits > HS_MAX_BITS || nbits % 64 != 0 ||
	    rawlen != sizeof(w) + nbits / 8)
		goto out;
	if (le16toh(w.k) < 1 || le16toh(w.k) > HS_MAX_K || !(fpp > 0.0 && fpp < 1.0) ||
	    le64toh(w.start_ms) > le64toh(w.end_ms) || le64toh(w.bits_set) > nbits)
		goto out;
	s = set_alloc(nbits);
	if (!s) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint64_t i = 0; i < nbits / 64; i++) {
		uint64_t le;

		memcpy(&le, raw + sizeof(w) + i * 8, 8);
		s->bits[i] = le64toh(le);
	}
	s->bits_set = le64toh(w.bits_set);
	if (popcount_words(s->bits, nbits / 64) != s->bits_set)
		goto out;
	s->k = le16toh(w.k);
	s->seed = le64toh(w.seed);
	s->start_ms = le64toh(w.start_ms);
	s->end_ms = le64toh(w.end_ms);
	s->inserts = le64toh(w.inserts);
	s->capacity = le64toh(w.capacity);
	s->fpp = fpp;
	*out = s;
	s = NULL;
	rc = 0;
out:
	set_free(s);
	return rc;
}

int tier__hitsets_load_archived(struct tier__hitsets *hs, const void *blob, size_t len)
{
	unsigned char *raw = NULL;
	struct hs_set *s = NULL;
	unsigned long long rawlen;
	size_t got;
	int rc = -EINVAL;

	if (!blob || len == 0)
		goto out;
	rawlen = ZSTD_getFrameContentSize(blob, len);
	if (rawlen == ZSTD_CONTENTSIZE_ERROR || rawlen == ZSTD_CONTENTSIZE_UNKNOWN ||
	    rawlen < sizeof(struct hs_wire) || rawlen > sizeof(struct hs_wire) + HS_MAX_BITS / 8)
		goto out;
	/* exactly one frame, nothing after it */
	if (ZSTD_findFrameCompressedSize(blob, len) != len)
		goto out;
	raw = malloc((size_t)rawlen);
	if (!raw) {
		rc = -ENOMEM;
		goto out;
	}
	got = ZSTD_decompress(raw, (size_t)rawlen, blob, len);
	if (ZSTD_isError(got) || got != rawlen)
		goto out;
	rc = decode_record(raw, (size_t)rawlen, &s);
	if (rc < 0)
		goto out;
	push_archived(hs, s);
	s = NULL;
out:
	set_free(s);
	free(raw);
	return rc;
}

static void set_info(const struct hs_set *s, int idx, struct tier_hitset_info *out)
{
	*out = (struct tier_hitset_info){
		.set = idx,
		.start_ms = s->start_ms,
		.end_ms = idx < 0 ? 0 : s->end_ms,
		.inserts = s->inserts,
		.unique = set_unique(s),
		.capacity = s->capacity,
		.bits = s->nbits,
		.bits_set = s->bits_set,
		.k = s->k,
		.fpp = s->fpp,
	};
}

int tier__hitsets_info(const struct tier__hitsets *hs, struct tier_hitset_info *out, size_t max)
{
	if (max && !out)
		return -EINVAL;
	if (max)
		set_info(hs->cur, -1, &out[0]);
	for (unsigned i = 0; i < hs->narch && i + 1u < max; i++)
		set_info(hs->arch[i], (int)i, &out[i + 1u]);
	return (int)hs->narch + 1;
}
