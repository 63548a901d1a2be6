/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz_trace.c - fuzz target for the block-trace parser
 * (tools/trace.c: CSV, fio iolog v2/v3, MSR/SNIA CSV, blkparse text) used by tier-sim and tier-bench on
 * files users hand them.  It checks what the header promises of an accepted
 * trace (times never go backwards, data ops have a length, max_end covers
 * every request, file indexes are in range) and that a refused one leaves
 * the trace empty with a "line N: why" message.  It never writes files.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_accepted(const struct trace *t)
{
	uint64_t max_end = 0;

	if (t->format != TRACE_FMT_CSV && t->format != TRACE_FMT_IOLOG2 &&
	    t->format != TRACE_FMT_IOLOG3 && t->format != TRACE_FMT_MSR &&
	    t->format != TRACE_FMT_BLKPARSE)
		abort();
	if (t->n > t->cap || (t->n && !t->recs))
		abort();
	if (t->format == TRACE_FMT_CSV && t->n_files != 0)
		abort();
	for (size_t i = 0; i < t->n; i++) {
		const struct trace_rec *r = &t->recs[i];

		if (i && r->time_us < t->recs[i - 1].time_us)
			abort();
		if (r->op > TRACE_OP_FLUSH)
			abort();
		if (r->op != TRACE_OP_FLUSH && (r->len == 0 || r->off + r->len < r->off))
			abort();
		if (t->format != TRACE_FMT_CSV && r->file >= t->n_files)
			abort();
		if (r->op != TRACE_OP_FLUSH && r->off + r->len > max_end)
			max_end = r->off + r->len;
	}
	if (max_end != t->max_end)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct trace t;
	char err[256];
	int rc;

	rc = trace_parse_buf((const char *)data, size, &t, err, sizeof(err));
	if (rc == 0) {
		check_accepted(&t);
		trace_free(&t);
		return 0;
	}
	if (t.recs || t.n || strncmp(err, "line ", 5) != 0)
		abort();   /* -ENOMEM is the only error without a line, and cannot happen here */
	return 0;
}
