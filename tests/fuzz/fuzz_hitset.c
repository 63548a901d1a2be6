/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz_hitset.c - fuzz target for the archived-hitset decoder
 * (tier__hitsets_load_archived), which reads zstd blobs back from the cache
 * pool at start-up.  The first input byte picks the layer: even = the rest is
 * the blob as stored (zstd framing, sizes, checksum); odd = the rest is a
 * decompressed record, compressed here first so the fuzzer reaches the record
 * checks without having to forge zstd.  An accepted set must answer queries,
 * describe itself (tier__hitsets_info), and survive encode -> load unchanged.  It does no I/O.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "tier/engine.h"
#include "libtier/hitset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void *compress_record(const uint8_t *raw, size_t rawlen, size_t *zlen)
{
	size_t bound = ZSTD_compressBound(rawlen);
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	void *z = malloc(bound);

	*zlen = 0;
	if (!cctx || !z)
		goto fail;
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	*zlen = ZSTD_compress2(cctx, z, bound, raw, rawlen);
	if (ZSTD_isError(*zlen))
		goto fail;
	ZSTD_freeCCtx(cctx);
	return z;
fail:
	ZSTD_freeCCtx(cctx);
	free(z);
	return NULL;
}

/* The newest archived set as handed out: out[1], after the current one. */
static struct tier_hitset_info newest_info(const struct tier__hitsets *hs)
{
	struct tier_hitset_info v[TIER_HITSET_MAX_SETS];
	int n = tier__hitsets_info(hs, v, TIER_HITSET_MAX_SETS);

	if (n < 2 || n > TIER_HITSET_MAX_SETS || v[0].set != -1 || v[1].set != 0)
		abort();
	if (!v[1].bits || v[1].bits_set > v[1].bits || !v[1].k)
		abort();   /* an accepted set must describe a usable filter */
	return v[1];
}

static bool same_info(const struct tier_hitset_info *a, const struct tier_hitset_info *b)
{
	return a->start_ms == b->start_ms && a->end_ms == b->end_ms &&
	       a->inserts == b->inserts && a->unique == b->unique &&
	       a->capacity == b->capacity && a->bits == b->bits &&
	       a->bits_set == b->bits_set && a->k == b->k &&
	       memcmp(&a->fpp, &b->fpp, sizeof(a->fpp)) == 0;
}

static void exercise(struct tier__hitsets *hs)
{
	struct tier__hitsets *back = NULL;
	struct tier_hitset_info i1, i2;
	void *blob = NULL;
	size_t len;
	uint64_t start;

	if (tier__hitsets_archived(hs) != 1)
		abort();
	for (uint64_t k = 0; k < 64; k++) {
		tier__hitsets_recent(hs, k * 0x9e3779b97f4a7c15ull, 2);
		tier__hitsets_temperature(hs, k, 20, 4);
	}
	if (tier__hitsets_encode_newest(hs, &blob, &len, &start) < 0)
		goto out;
	if (tier__hitsets_create(4, 0.05, 1024, 0, &back) < 0)
		goto out;
	if (tier__hitsets_load_archived(back, blob, len) != 0)
		abort();   /* what we wrote ourselves must load */
	i1 = newest_info(hs);
	i2 = newest_info(back);
	if (!same_info(&i1, &i2))
		abort();
	for (uint64_t k = 0; k < 64; k++)
		if (tier__hitsets_temperature(hs, k, 0, 4) !=
		    tier__hitsets_temperature(back, k, 0, 4))
			abort();
out:
	free(blob);
	tier__hitsets_destroy(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tier__hitsets *hs = NULL;
	void *z = NULL;
	const void *blob;
	size_t len;
	int rc;

	if (size < 1)
		return 0;
	if (tier__hitsets_create(4, 0.05, 1024, 0, &hs) < 0)
		return 0;
	if (data[0] & 1) {
		z = compress_record(data + 1, size - 1, &len);
		if (!z)
			goto out;
		blob = z;
	} else {
		blob = data + 1;
		len = size - 1;
	}
	rc = tier__hitsets_load_archived(hs, blob, len);
	if (rc == 0)
		exercise(hs);
	else if (rc != -EINVAL && rc != -ENOMEM)
		abort();
out:
	free(z);
	tier__hitsets_destroy(hs);
	return 0;
}
