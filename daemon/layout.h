/* SPDX-License-Identifier: MIT */
/*
 * daemon/layout.h - the layout record each pool keeps ("tier.layout"):
 * the format, object_size (where each byte of an image lives), extent_size
 * (what the cache's bitmaps count) and the images with their sizes.  A
 * start over a pool laid out otherwise is refused, naming the key and both
 * values: serving it would put data at the wrong offsets.
 */
#ifndef TIERD_LAYOUT_H
#define TIERD_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tier/store.h"

/* Exit status for a configuration error or a layout mismatch (sysexits' EX_CONFIG). */
#define TIERD_EXIT_CONFIG 78

#define TIERD_LAYOUT_OID      "tier.layout"
#define TIERD_LAYOUT_FORMAT   1u
#define TIERD_LAYOUT_MAX_IMG  256u

struct tierd_layout_image {
	char name[128];
	char prefix[TIER_OID_MAX];
	uint64_t size;
};

struct tierd_layout {
	unsigned format;
	uint64_t object_size;
	uint64_t extent_size;   /* 0: not recorded (the base pool's record) */
	size_t n;
	struct tierd_layout_image img[TIERD_LAYOUT_MAX_IMG];
};

/*
 * Text form, one item per line: "tierd-layout 1", "object_size N",
 * "extent_size N" (cache pools), "image NAME PREFIX SIZE", then "end"
 * (what follows is ignored: a record rewritten in place may leave a tail).
 */
size_t tierd_layout_format(const struct tierd_layout *l, char *buf, size_t cap);
/* Returns 0, or -EINVAL with err naming the line. */
int tierd_layout_parse(const char *text, size_t len, struct tierd_layout *out, char *err,
		       size_t errlen);
/*
 * The pool's record (have) against what this start wants: -EINVAL with err
 * naming the key and both values when they cannot both be right; else 0 and
 * merged = want plus the images only have lists (kept, so that an image
 * added back later is checked too), *changed when merged differs from have.
 * Image sizes may change (the stranded check guards data past a new end).
 */
int tierd_layout_merge(const struct tierd_layout *have, const struct tierd_layout *want,
		       struct tierd_layout *merged, bool *changed, char *err, size_t errlen);
/*
 * Read the pool's record, check it against want, write it when it is new
 * or changed (FUA).  Blocking: before the engine starts.  0, or -errno with
 * err (-EINVAL: a mismatch or an unreadable record).  *note gets a line
 * worth logging when the record was created or changed ("" otherwise).
 */
int tierd_layout_apply(struct tier_store *pool, struct tier_cq *cq, const char *role,
		       const struct tierd_layout *want, char *err, size_t errlen, char *note,
		       size_t notelen);

#endif
