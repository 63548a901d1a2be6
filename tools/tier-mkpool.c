/* SPDX-License-Identifier: MIT */
/*
 * tools/tier-mkpool.c - lay out a local-backend data_dir holding N cached
 * objects of one image, for the metadata benchmark (tools/bench/bench-metadata.sh)
 * and its bounded test (tests/integration/test-metadata.sh), and check an
 * image read back through tierd against what was laid out.  The objects go
 * through libtier's own local store (WRITE with F_META and a tier.meta
 * record from tier_meta_encode), so the files and records are exactly what
 * tierd writes; nothing is flushed to base.
 *
 * Object i of the image is one of four kinds (i % 4), with 8-byte words
 * word(i, block, gen) in each 4 KiB block (gen 1 new, 0 old):
 *   0 dirty, every extent valid and dirty: cache new, nothing in base;
 *   1 clean, every extent valid: cache and base old;
 *   2 dirty, the first half of its extents valid, extent 0 dirty (new),
 *     the other valid ones clean (old); base old (object mode: as kind 0);
 *   3 clean, the first half valid: cache and base old (object mode: kind 1).
 * Reading the image gives new on dirty extents and old everywhere else.
 * It must never write into a data_dir a tierd is running on (the daemon's
 * lock file is taken first).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tier/meta.h"
#include "tier/store.h"

#define BLK     4096u
#define WINDOW  64u

struct cfg {
	const char *dir, *image, *verify;
	uint64_t n, osz, esz;     /* esz 0: object mode */
	bool no_base;   /* nothing in base: the counts hold, --verify would not */
};

struct slot {
	struct tier_store_op op;
	uint8_t meta[TIER_META_MAX];
	void *buf;
	bool busy;
};

static int g_err;

static uint64_t word(uint64_t obj, uint64_t blk, unsigned gen)
{
	return ((obj * 0x9e3779b97f4a7c15ull) ^ (blk << 32) ^ (gen ? 0x6e6577ull : 0x6f6c64ull)) | 1;
}

/* len bytes of object obj from its start: new in the first new_len bytes, old after. */
static void fill(void *buf, uint64_t obj, uint64_t len, uint64_t new_len)
{
	uint64_t *w = buf;

	for (uint64_t b = 0; b < len / BLK; b++)
		for (size_t k = 0; k < BLK / 8; k++)
			w[b * (BLK / 8) + k] = word(obj, b, b * BLK < new_len) + k;
}

/* What the layout holds for object i: kind, extents, valid and dirty counts. */
struct shape {
	unsigned kind;
	uint32_t nbits, nvalid, ndirty;   /* object mode: nbits 1 */
};

static struct shape shape_of(const struct cfg *c, uint64_t i)
{
	struct shape s = { .kind = (unsigned)(i % 4) };

	s.nbits = c->esz ? (uint32_t)(c->osz / c->esz) : 1;
	if (s.nbits < 2 && s.kind >= 2)
		s.kind -= 2;
	s.nvalid = s.kind >= 2 ? (s.nbits + 1) / 2 : s.nbits;
	s.ndirty = s.kind == 0 ? s.nvalid : s.kind == 2 ? 1 : 0;
	return s;
}

static void on_done(struct tier_store_op *op)
{
	struct slot *s = op->priv;

	if (op->result < 0 && !g_err) {
		fprintf(stderr, "tier-mkpool: %s: %s\n", op->oid, strerror(-op->result));
		g_err = op->result;
	}
	s->busy = false;
}

static struct slot *slot_get(struct slot *slots, struct tier_cq *cq)
{
	for (;;) {
		for (unsigned i = 0; i < WINDOW; i++)
			if (!slots[i].busy)
				return &slots[i];
		tier_cq_wait(cq, -1);
		tier_cq_drain(cq);
	}
}

static int put(struct tier_store *st, struct tier_cq *cq, struct slot *slots, const char *oid,
	       uint64_t len, uint64_t obj, uint64_t new_len, const void *meta, int meta_len)
{
	struct slot *s = slot_get(slots, cq);
	int rc;

	memset(&s->op, 0, sizeof(s->op));
	snprintf(s->op.oid, sizeof(s->op.oid), "%s", oid);
	s->op.opcode = TIER_STORE_WRITE;
	s->op.len = len;
	s->op.buf = s->buf;
	fill(s->buf, obj, len, new_len);
	if (meta) {
		memcpy(s->meta, meta, (size_t)meta_len);
		s->op.flags = TIER_STORE_F_META;
		s->op.meta = s->meta;
		s->op.meta_len = (uint32_t)meta_len;
		s->op.version = 1;
	}
	s->op.cb = on_done;
	s->op.priv = s;
	s->busy = true;
	rc = tier_store_submit(st, &s->op);
	if (rc < 0)
		s->busy = false;
	return rc;
}

static int lay_out(const struct cfg *c)
{
	char path[4096], oid[TIER_OID_MAX];
	struct tier_local_opts lo = { 0 };
	struct tier_store *cache = NULL, *base = NULL;
	struct tier_cq *cq = NULL;
	struct slot *slots = NULL;
	size_t words = c->esz ? tier_meta_words((uint32_t)(c->osz / c->esz)) : 0;
	uint64_t *valid = calloc(words + 1, 8), *dirty = calloc(words + 1, 8);
	uint64_t n_dirty = 0;
	uint8_t meta[TIER_META_MAX];
	int rc, lockfd = -1;

	if (!valid || !dirty) {
		rc = -ENOMEM;
		goto out;
	}
	if (mkdir(c->dir, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		fprintf(stderr, "tier-mkpool: %s: %s\n", c->dir, strerror(errno));
		goto out;
	}
	snprintf(path, sizeof(path), "%s/tierd.lock", c->dir);
	lockfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lockfd < 0 || flock(lockfd, LOCK_EX | LOCK_NB) < 0) {
		rc = -errno;
		fprintf(stderr, "tier-mkpool: %s: %s (a tierd running there?)\n", path,
			strerror(errno));
		goto out;
	}
	if ((rc = tier_cq_create(NULL, NULL, &cq)) < 0)
		goto out;
	lo.dir = path;
	snprintf(path, sizeof(path), "%s/cache", c->dir);
	if ((rc = tier_store_local_create("cache", &lo, cq, &cache)) < 0)
		goto out;
	snprintf(path, sizeof(path), "%s/base", c->dir);
	if ((rc = tier_store_local_create("base", &lo, cq, &base)) < 0)
		goto out;
	rc = -ENOMEM;
	slots = calloc(WINDOW, sizeof(*slots));
	if (!slots)
		goto out;
	for (unsigned i = 0; i < WINDOW; i++)
		if (!(slots[i].buf = aligned_alloc(BLK, c->osz)))
			goto out;
	for (uint64_t i = 0; i < c->n && !g_err; i++) {
		struct shape s = shape_of(c, i);
		struct tier_meta m = { .version = 1, .object_size = (uint32_t)c->osz };
		uint64_t vlen = c->esz ? s.nvalid * c->esz : c->osz;

		snprintf(oid, sizeof(oid), "rbd_data.%s.%016" PRIx64, c->image, i);
		if (s.kind != 0 && !c->no_base && (rc = put(base, cq, slots, oid, c->osz, i, 0, NULL, 0)) < 0)
			goto out;
		if (s.ndirty) {
			m.flags |= TIER_META_F_DIRTY;
			n_dirty++;
		}
		if (c->esz) {
			memset(valid, 0, words * 8);
			memset(dirty, 0, words * 8);
			for (uint32_t b = 0; b < s.nvalid; b++)
				valid[b / 64] |= 1ull << (b % 64);
			for (uint32_t b = 0; b < s.ndirty; b++)
				dirty[b / 64] |= 1ull << (b % 64);
			m.flags |= TIER_META_F_EXTENTS;
			m.extent_size = (uint32_t)c->esz;
			m.nbits = s.nbits;
			m.valid = valid;
			m.dirty = dirty;
		}
		rc = tier_meta_encode(&m, meta, sizeof(meta));
		if (rc < 0)
			goto out;
		/* new data in the dirty extents only (the leading ones); valid clean ones old */
		rc = put(cache, cq, slots, oid, vlen, i, c->esz ? s.ndirty * c->esz : s.ndirty ? vlen : 0,
			 meta, rc);
		if (rc < 0)
			goto out;
	}
	rc = 0;
out:
	while (slots && tier_store_in_flight(cache) + (base ? tier_store_in_flight(base) : 0)) {
		tier_cq_wait(cq, -1);
		tier_cq_drain(cq);
	}
	if (rc == 0 && g_err)
		rc = g_err;
	if (rc == 0)
		printf("laid out %" PRIu64 " cached objects (%" PRIu64 " dirty) of image %s, "
		       "object_size %" PRIu64 ", extent_size %" PRIu64 "\n", c->n, n_dirty,
		       c->image, c->osz, c->esz);
	tier_store_destroy(base);
	tier_store_destroy(cache);
	tier_cq_destroy(cq);
	if (lockfd >= 0)
		close(lockfd);
	if (slots)
		for (unsigned i = 0; i < WINDOW; i++)
			free(slots[i].buf);
	free(slots);
	free(valid);
	free(dirty);
	return rc;
}

/* Read the image (raw, n * object_size bytes) from path ("-": stdin) and compare. */
static int verify(const struct cfg *c)
{
	FILE *f = strcmp(c->verify, "-") ? fopen(c->verify, "rb") : stdin;
	uint64_t *buf = malloc(BLK), bad = 0;
	int rc = 0;

	if (!f || !buf) {
		fprintf(stderr, "tier-mkpool: %s: %s\n", c->verify, strerror(errno));
		free(buf);
		return -EIO;
	}
	for (uint64_t i = 0; i < c->n && !rc; i++) {
		struct shape s = shape_of(c, i);

		for (uint64_t b = 0; b < c->osz / BLK; b++) {
			uint64_t ext = c->esz ? b * BLK / c->esz : 0;
			unsigned gen = ext < s.ndirty;

			if (fread(buf, 1, BLK, f) != BLK) {
				fprintf(stderr, "tier-mkpool: %s: short at object %" PRIu64 "\n",
					c->verify, i);
				rc = -EIO;
				break;
			}
			for (size_t k = 0; k < BLK / 8; k++) {
				if (buf[k] == word(i, b, gen) + k)
					continue;
				if (bad++ < 10)
					fprintf(stderr, "tier-mkpool: object %" PRIu64 " (kind %u) block "
						"%" PRIu64 ": not the %s data\n", i, s.kind, b,
						gen ? "new (dirty)" : "old (clean or base)");
				break;
			}
		}
	}
	if (f != stdin)
		fclose(f);
	free(buf);
	if (rc == 0 && bad) {
		fprintf(stderr, "tier-mkpool: %" PRIu64 " blocks differ\n", bad);
		rc = -EIO;
	}
	if (rc == 0)
		printf("verified %" PRIu64 " objects of image %s\n", c->n, c->image);
	return rc;
}

/* The counts the layout holds, as tierd's perf dump names them. */
static void expect(const struct cfg *c)
{
	uint64_t n_dirty = 0, cached = 0, dirty = 0;

	for (uint64_t i = 0; i < c->n; i++) {
		struct shape s = shape_of(c, i);
		uint64_t e = c->esz ? c->esz : c->osz;

		n_dirty += s.ndirty != 0;
		cached += s.nvalid * e;
		dirty += s.ndirty * e;
	}
	printf("cached_objects=%" PRIu64 " dirty_objects=%" PRIu64 " cached_bytes=%" PRIu64
	       " dirty_bytes=%" PRIu64 "\n", c->n, n_dirty, cached, dirty);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tier-mkpool --dir DATA_DIR --image NAME --objects N\n"
		"                   [--object-size BYTES] [--extent-size BYTES]\n"
		"                   [--no-base] [--verify FILE|-] [--expect]\n"
		"Lays out N cached objects of image NAME (prefix rbd_data.NAME) in the\n"
		"local backend's DATA_DIR/cache (and base), as tierd writes them;\n"
		"object_size defaults to 4096, extent_size to object_size (0: object\n"
		"mode); --no-base leaves base empty (faster; the image then reads\n"
		"otherwise).  --verify reads the image's raw bytes and checks them;\n"
		"--expect prints the counts tierd should report.  Exit 0 ok, 1 failed, 2 usage.\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "image", required_argument, NULL, 'i' },
		{ "objects", required_argument, NULL, 'n' },
		{ "object-size", required_argument, NULL, 'o' },
		{ "extent-size", required_argument, NULL, 'e' },
		{ "verify", required_argument, NULL, 'v' },
		{ "expect", no_argument, NULL, 'x' },
		{ "no-base", no_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct cfg c = { .osz = 4096, .esz = UINT64_MAX };
	bool want_expect = false;
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'd': c.dir = optarg; break;
		case 'i': c.image = optarg; break;
		case 'n': c.n = strtoull(optarg, NULL, 0); break;
		case 'o': c.osz = strtoull(optarg, NULL, 0); break;
		case 'e': c.esz = strtoull(optarg, NULL, 0); break;
		case 'v': c.verify = optarg; break;
		case 'x': want_expect = true; break;
		case 'b': c.no_base = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (c.esz == UINT64_MAX)
		c.esz = c.osz;
	if (optind != argc || !c.image || !c.n || (!c.dir && !c.verify && !want_expect) ||
	    c.osz < BLK || c.osz % BLK || c.osz > (64u << 20) ||
	    (c.esz && (c.esz < BLK || c.osz % c.esz || c.osz / c.esz > 64 * 64))) {
		usage(stderr);
		return 2;
	}
	if (want_expect) {
		expect(&c);
		return 0;
	}
	rc = c.verify ? verify(&c) : lay_out(&c);
	if (rc < 0 && !c.verify)
		fprintf(stderr, "tier-mkpool: %s\n", strerror(-rc));
	return rc < 0 ? 1 : 0;
}
