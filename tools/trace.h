/* SPDX-License-Identifier: MIT */
/*
 * tools/trace.h - block I/O trace readers for tier-sim and tier-bench.
 *
 * Formats (detected from the first line):
 *  - CSV: `time_us,op,offset,length`, op one of R W T F or read write trim
 *    flush (any case).  An optional header line starting with "time",
 *    blank lines and lines starting with '#' are skipped.  Times must not
 *    go backwards.  Flush may have offset and length 0.
 *  - fio iolog v2 (first line "fio version 2 iolog"): `file action` for
 *    add/open/close, `file action offset length` for read/write/trim/
 *    sync/datasync (the last two become flushes) and wait (offset = usec
 *    to wait; it advances the trace clock).
 *  - fio iolog v3 ("fio version 3 iolog"): the same lines with a leading
 *    timestamp in microseconds since the start of the run; wait is
 *    ignored, as fio does.
 *  - MSR Cambridge / SNIA IOTTA CSV (detected by 7 fields whose 4th is
 *    Read or Write): `Timestamp,Hostname,DiskNumber,Type,Offset,Size,
 *    ResponseTime`, the timestamp in Windows filetime (100 ns ticks; the
 *    first line is time 0), offset and size in bytes.  Each distinct
 *    host/disk pair is a "file".
 *  - blkparse's default text output (detected by a first line of the form
 *    `MAJ,MIN CPU SEQ SECONDS.NANOS PID ACTION RWBS ...`): only the events
 *    of one action are replayed, Q (queued) if the trace has any, else D
 *    (issued), else C (completed), so a request is counted once; `SECTOR +
 *    COUNT` in 512-byte sectors; RWBS with D is a trim, with W a write,
 *    with R a read, a lone F (an empty preflush) a flush; N (no data) is
 *    skipped.  Other actions and message lines (m) are skipped; the
 *    per-CPU summary blkparse prints at the end (from the first line
 *    starting with "CPU" or "Total") ends the trace.  Each device is a "file".
 * Any other line is an error naming its line number: the whole trace is
 * rejected rather than silently replayed in part.
 */
#ifndef TIER_TOOLS_TRACE_H
#define TIER_TOOLS_TRACE_H

#include <stddef.h>
#include <stdint.h>

enum trace_op { TRACE_OP_READ = 0, TRACE_OP_WRITE, TRACE_OP_TRIM, TRACE_OP_FLUSH };

enum trace_format { TRACE_FMT_CSV = 1, TRACE_FMT_IOLOG2, TRACE_FMT_IOLOG3, TRACE_FMT_MSR,
		    TRACE_FMT_BLKPARSE };

struct trace_rec {
	uint64_t time_us;
	uint64_t off, len;
	enum trace_op op;
	uint32_t file;       /* iolog: index of the file name, in order of appearance */
};

struct trace {
	struct trace_rec *recs;
	size_t n, cap;
	enum trace_format format;
	uint32_t n_files;    /* iolog: distinct file names seen (CSV: 0) */
	uint64_t max_end;    /* highest offset + length seen */
};

/*
 * Parse a whole trace held in memory (need not be NUL-terminated).
 * 0, or -EINVAL with "line N: why" in err, or -ENOMEM.  On error *t is
 * left empty (nothing to free).
 */
int trace_parse_buf(const char *buf, size_t len, struct trace *t, char *err, size_t errlen);
/* Read and parse a file; -errno from open/read as well. */
int trace_load(const char *path, struct trace *t, char *err, size_t errlen);
void trace_free(struct trace *t);
const char *trace_op_name(enum trace_op op);
const char *trace_format_name(enum trace_format f);

#endif
