/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz_hitset.c - fuzz target for the archived-hitset decoder
 * (tier__hitsets_load_archived), which reads zstd blobs back from the cache
 * pool at start-up.  The first input byte picks the layer: even = the rest is
 * the blob as stored (zstd framing, sizes, checksum); odd = the rest is a
 * decompressed record, compressed here first so the fuzzer reaches the record
 * checks without having to forge zstd.  An accepted set must answer queries,
 * render as JSON, and survive encode -> load unchanged.  It does no I/O.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

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

/* The JSON element of the newest archived set: "[{current},{set 0...}". */
static char *newest_json(const struct tier__hitsets *hs)
{
	char *j = tier__hitsets_json(hs), *p;

	if (!j)
		return NULL;
	p = strstr(j, "{\"set\":0,");
	if (!p)
		abort();
	memmove(j, p, strlen(p) + 1);
	p = strchr(j, '}');
	if (p)
		p[1] = '\0';
	return j;
}

static void exercise(struct tier__hitsets *hs)
{
	struct tier__hitsets *back = NULL;
	char *j1 = NULL, *j2 = NULL;
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
	j1 = newest_json(hs);
	j2 = newest_json(back);
	if (j1 && j2 && strcmp(j1, j2) != 0)
		abort();
	for (uint64_t k = 0; k < 64; k++)
		if (tier__hitsets_temperature(hs, k, 0, 4) !=
		    tier__hitsets_temperature(back, k, 0, 4))
			abort();
out:
	free(j1);
	free(j2);
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
