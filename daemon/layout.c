/* SPDX-License-Identifier: MIT */
/*
 * daemon/layout.c - the layout record of a pool (layout.h): its text form,
 * the comparison with the configuration, and reading and writing it through
 * the store seam before the engine starts.  It must never let a start go
 * on over a pool whose object_size or extent_size differs from the
 * configuration's, and never rewrite a record it could not read.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tier/store.h"
#include "layout.h"

#define LAYOUT_CAP 65536

static void set_err(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t n, const char *fmt, ...)
{
	va_list ap;

	if (!err || !n)
		return;
	va_start(ap, fmt);
	vsnprintf(err, n, fmt, ap);
	va_end(ap);
}

size_t tierd_layout_format(const struct tierd_layout *l, char *buf, size_t cap)
{
	size_t o = 0;
	int n;

#define PUT(...)                                                      \
	do {                                                          \
		n = snprintf(buf + o, o < cap ? cap - o : 0, __VA_ARGS__); \
		o += n > 0 ? (size_t)n : 0;                           \
	} while (0)
	PUT("tierd-layout %u\n", TIERD_LAYOUT_FORMAT);
	PUT("object_size %" PRIu64 "\n", l->object_size);
	if (l->extent_size)
		PUT("extent_size %" PRIu64 "\n", l->extent_size);
	for (size_t i = 0; i < l->n; i++)
		PUT("image %s %s %" PRIu64 "\n", l->img[i].name, l->img[i].prefix, l->img[i].size);
	PUT("end\n");
#undef PUT
	return o;
}

static bool parse_u64(const char *s, uint64_t *v)
{
	char *end;
	unsigned long long x;

	if (!*s || *s == '-')
		return false;
	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno || *end)
		return false;
	*v = x;
	return true;
}

int tierd_layout_parse(const char *text, size_t len, struct tierd_layout *out, char *err,
		       size_t errlen)
{
	char line[512];
	size_t pos = 0;
	unsigned lineno = 0;

	bool ended = false;

	memset(out, 0, sizeof(*out));
	while (pos < len) {
		size_t e = pos, l;
		char a[32], b[128], c[TIER_OID_MAX], d[32], extra[2];
		uint64_t v;
		int k;

		while (e < len && text[e] != '\n')
			e++;
		l = e - pos;
		lineno++;
		if (l >= sizeof(line)) {
			set_err(err, errlen, "line %u: too long", lineno);
			return -EINVAL;
		}
		memcpy(line, text + pos, l);
		line[l] = '\0';
		pos = e + 1;
		if (memchr(line, '\0', l)) {
			set_err(err, errlen, "line %u: a NUL byte", lineno);
			return -EINVAL;
		}
		k = sscanf(line, "%31s %127s %127s %31s %1s", a, b, c, d, extra);
		if (k <= 0)
			continue;
		if (lineno > 1 && k == 1 && !strcmp(a, "end")) {
			ended = true;
			break;
		}
		if (lineno == 1) {
			if (k != 2 || strcmp(a, "tierd-layout") || !parse_u64(b, &v)) {
				set_err(err, errlen, "line 1: not a tierd layout record");
				return -EINVAL;
			}
			if (v != TIERD_LAYOUT_FORMAT) {
				set_err(err, errlen, "format %" PRIu64 " (this tierd knows %u)", v,
					TIERD_LAYOUT_FORMAT);
				return -EINVAL;
			}
			out->format = (unsigned)v;
		} else if (k == 2 && !strcmp(a, "object_size") && parse_u64(b, &v) && v) {
			out->object_size = v;
		} else if (k == 2 && !strcmp(a, "extent_size") && parse_u64(b, &v) && v) {
			out->extent_size = v;
		} else if (k == 4 && !strcmp(a, "image") && parse_u64(d, &v)) {
			struct tierd_layout_image *im;

			if (out->n >= TIERD_LAYOUT_MAX_IMG) {
				set_err(err, errlen, "line %u: more than %u images", lineno,
					TIERD_LAYOUT_MAX_IMG);
				return -EINVAL;
			}
			im = &out->img[out->n++];
			snprintf(im->name, sizeof(im->name), "%s", b);
			snprintf(im->prefix, sizeof(im->prefix), "%s", c);
			im->size = v;
		} else {
			set_err(err, errlen, "line %u: '%.60s' not understood", lineno, line);
			return -EINVAL;
		}
	}
	if (!out->format || !out->object_size || !ended) {
		set_err(err, errlen, "incomplete record (no %s)",
			!out->format ? "header" : !out->object_size ? "object_size" : "end line");
		return -EINVAL;
	}
	return 0;
}

static const struct tierd_layout_image *find_img(const struct tierd_layout *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->img[i].name, name))
			return &l->img[i];
	return NULL;
}

int tierd_layout_merge(const struct tierd_layout *have, const struct tierd_layout *want,
		       struct tierd_layout *merged, bool *changed, char *err, size_t errlen)
{
	*changed = false;
	if (have->object_size != want->object_size) {
		set_err(err, errlen, "object_size: the pool was laid out with %" PRIu64
			", the configuration says %" PRIu64 " (every image's data would be read "
			"at the wrong offsets; set object_size = %" PRIu64 ", or change the layout "
			"as docs/OPERATIONS.md describes)", have->object_size, want->object_size,
			have->object_size);
		return -EINVAL;
	}
	if (have->extent_size && want->extent_size && have->extent_size != want->extent_size) {
		set_err(err, errlen, "extent_size: the pool was laid out with %" PRIu64
			", the configuration says %" PRIu64 " (the cache's bitmaps count extents of "
			"the first; set extent_size = %" PRIu64 ", or flush and drop the cache "
			"first as docs/OPERATIONS.md describes)", have->extent_size,
			want->extent_size, have->extent_size);
		return -EINVAL;
	}
	*merged = *want;
	if (!merged->extent_size)
		merged->extent_size = have->extent_size;
	if (merged->extent_size != have->extent_size)
		*changed = true;
	for (size_t i = 0; i < want->n; i++) {
		const struct tierd_layout_image *h = find_img(have, want->img[i].name);

		if (!h || h->size != want->img[i].size || strcmp(h->prefix, want->img[i].prefix))
			*changed = true;
	}
	for (size_t i = 0; i < have->n; i++) {
		if (find_img(want, have->img[i].name))
			continue;
		if (merged->n >= TIERD_LAYOUT_MAX_IMG) {
			set_err(err, errlen, "more than %u images in the layout record",
				TIERD_LAYOUT_MAX_IMG);
			return -EINVAL;
		}
		merged->img[merged->n++] = have->img[i];
	}
	return 0;
}

/* ---- through the store seam, blocking ---- */

static void done_cb(struct tier_store_op *op)
{
	*(int *)op->priv = 1;
}

static int run1(struct tier_store *st, struct tier_cq *cq, struct tier_store_op *op)
{
	int done = 0, rc;

	op->cb = done_cb;
	op->priv = &done;
	rc = tier_store_submit(st, op);
	if (rc < 0)
		return rc;
	while (!done) {
		if (!tier_cq_drain(cq))
			tier_cq_wait(cq, 1000);
	}
	return op->result;
}

int tierd_layout_apply(struct tier_store *pool, struct tier_cq *cq, const char *role,
		       const struct tierd_layout *want, char *err, size_t errlen, char *note,
		       size_t notelen)
{
	struct tier_store_op op;
	struct tierd_layout *have = calloc(2, sizeof(*have)), *merged = have ? have + 1 : NULL;
	char *buf = malloc(LAYOUT_CAP), perr[256] = "";
	bool changed = true, fresh = false;
	size_t n;
	int rc;

	if (note && notelen)
		note[0] = '\0';
	if (!have || !buf) {
		rc = -ENOMEM;
		goto out;
	}
	/*
	 * Several tierds share a pool: read, merge and write back only if
	 * nobody wrote in between (a guard on the record's version, F_EXCL for
	 * the first), else read again.
	 */
	for (int attempt = 0;; attempt++) {
		uint64_t ver = 0;

		if (attempt == 8) {
			set_err(err, errlen, "%s pool: %s keeps changing under us (other tierds "
				"starting?); try again", role, TIERD_LAYOUT_OID);
			rc = -EAGAIN;
			goto out;
		}
		fresh = false;
		changed = true;
		memset(&op, 0, sizeof(op));
		op.opcode = TIER_STORE_STAT;
		snprintf(op.oid, sizeof(op.oid), "%s", TIERD_LAYOUT_OID);
		rc = run1(pool, cq, &op);
		if (rc == -ENOENT) {
			fresh = true;
			*merged = *want;
		} else if (rc < 0) {
			set_err(err, errlen, "%s pool: reading %s: %s", role, TIERD_LAYOUT_OID, strerror(-rc));
			goto out;
		} else {
			uint64_t size = op.obj_size;

			ver = op.obj_version;
			if (size == 0 || size >= LAYOUT_CAP) {
				set_err(err, errlen, "%s pool: %s is %llu bytes: not a layout record "
					"(move it away if the pool is known to match the configuration)",
					role, TIERD_LAYOUT_OID, (unsigned long long)size);
				rc = -EINVAL;
				goto out;
			}
			memset(&op, 0, sizeof(op));
			op.opcode = TIER_STORE_READ;
			snprintf(op.oid, sizeof(op.oid), "%s", TIERD_LAYOUT_OID);
			op.buf = buf;
			op.len = size;
			rc = run1(pool, cq, &op);
			if (rc < 0) {
				set_err(err, errlen, "%s pool: reading %s: %s", role, TIERD_LAYOUT_OID,
					strerror(-rc));
				goto out;
			}
			if ((rc = tierd_layout_parse(buf, size, have, perr, sizeof(perr))) < 0) {
				set_err(err, errlen, "%s pool: %s: %s", role, TIERD_LAYOUT_OID, perr);
				goto out;
			}
			if ((rc = tierd_layout_merge(have, want, merged, &changed, perr, sizeof(perr))) < 0) {
				set_err(err, errlen, "%s pool: %s", role, perr);
				goto out;
			}
		}
		rc = 0;
		if (!changed)
			goto out;
		n = tierd_layout_format(merged, buf, LAYOUT_CAP);
		if (n >= LAYOUT_CAP) {
			set_err(err, errlen, "%s pool: layout record too large", role);
			rc = -E2BIG;
			goto out;
		}
		/* in place, durably; a longer old record's tail lies past "end" and is ignored */
		memset(&op, 0, sizeof(op));
		op.opcode = TIER_STORE_WRITE;
		op.flags = TIER_STORE_F_FUA | TIER_STORE_F_META |
			   (fresh ? TIER_STORE_F_EXCL : TIER_STORE_F_GUARD);
		op.expect_version = ver;
		op.version = ver + 1;
		snprintf(op.oid, sizeof(op.oid), "%s", TIERD_LAYOUT_OID);
		op.buf = buf;
		op.len = n;
		rc = run1(pool, cq, &op);
		if (rc == -ECANCELED || rc == -EEXIST)
			continue;     /* another tierd wrote it meanwhile: merge with that */
		if (rc < 0) {
			set_err(err, errlen, "%s pool: writing %s: %s", role, TIERD_LAYOUT_OID, strerror(-rc));
			goto out;
		}
		break;
	}
	rc = 0;
	if (note && notelen)
		snprintf(note, notelen, "%s pool: layout record %s (object_size %llu%s)", role,
			 fresh ? "written" : "updated", (unsigned long long)merged->object_size,
			 merged->extent_size ? ", extent_size recorded" : "");
out:
	free(have);
	free(buf);
	return rc;
}
