/* SPDX-License-Identifier: MIT */
/*
 * trace.c - parse CSV and fio iolog v2/v3 block traces into an array of
 * timed requests.  It decides what each line means and rejects, with its
 * line number, anything it does not fully understand; it must never guess
 * at a malformed line or replay a trace in part.
 */
#include "trace.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TRACE_MAX_FIELDS 6
#define TRACE_MAX_FILES  64

struct parser {
	struct trace *t;
	size_t line;
	uint64_t t0;                   /* MSR: the first timestamp (filetime ticks) */
	bool have_t0;
	char action;                   /* blkparse: the action replayed (Q, D or C) */
	bool done;                     /* blkparse: the summary started */
	uint64_t clock_us;             /* iolog v2: advanced by wait */
	char *files[TRACE_MAX_FILES];  /* iolog file names */
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 2, 3)))
static int fail(struct parser *p, const char *fmt, ...)
{
	va_list ap;
	int n = 0;

	if (p->errlen) {
		n = snprintf(p->err, p->errlen, "line %zu: ", p->line);
		if (n < 0 || (size_t)n >= p->errlen)
			return -EINVAL;
		va_start(ap, fmt);
		vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end = NULL;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	*out = strtoull(s, &end, 10);
	if (errno || *end != '\0')
		return -EINVAL;
	return 0;
}

static int push(struct parser *p, uint64_t time_us, enum trace_op op,
		uint64_t off, uint64_t len, uint32_t file)
{
	struct trace *t = p->t;
	struct trace_rec *r;

	if (op != TRACE_OP_FLUSH && len == 0)
		return fail(p, "length 0 for %s", trace_op_name(op));
	if (off + len < off)
		return fail(p, "offset + length overflows");
	if (t->n && time_us < t->recs[t->n - 1].time_us)
		return fail(p, "time goes backwards (%llu < %llu)",
			    (unsigned long long)time_us,
			    (unsigned long long)t->recs[t->n - 1].time_us);
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1024;
		struct trace_rec *nr = realloc(t->recs, cap * sizeof(*nr));

		if (!nr)
			return -ENOMEM;
		t->recs = nr;
		t->cap = cap;
	}
	r = &t->recs[t->n++];
	r->time_us = time_us;
	r->op = op;
	r->off = off;
	r->len = len;
	r->file = file;
	if (op != TRACE_OP_FLUSH && off + len > t->max_end)
		t->max_end = off + len;
	return 0;
}

/* Split on `sep` (or on runs of blanks when sep == 0), trimming blanks. */
static size_t split(char *s, char sep, char **f, size_t max)
{
	size_t n = 0;

	for (;;) {
		while (*s == ' ' || *s == '\t')
			s++;
		if (!sep && *s == '\0')
			break;
		if (n == max)
			return max + 1;
		f[n++] = s;
		while (*s && (sep ? *s != sep : (*s != ' ' && *s != '\t')))
			s++;
		char *end = s;
		while (end > f[n - 1] && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
		if (*s == '\0') {
			*end = '\0';
			break;
		}
		s++;
		*end = '\0';
	}
	return n;
}

static int csv_op(const char *s, enum trace_op *op)
{
	static const struct { const char *a, *b; enum trace_op op; } ops[] = {
		{ "R", "read", TRACE_OP_READ }, { "W", "write", TRACE_OP_WRITE },
		{ "T", "trim", TRACE_OP_TRIM }, { "F", "flush", TRACE_OP_FLUSH },
	};

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		if (!strcasecmp(s, ops[i].a) || !strcasecmp(s, ops[i].b)) {
			*op = ops[i].op;
			return 0;
		}
	}
	return -EINVAL;
}

static int csv_line(struct parser *p, char *s, bool first)
{
	char *f[TRACE_MAX_FIELDS];
	uint64_t time_us, off, len;
	enum trace_op op;
	size_t n;

	if (first && !strncasecmp(s, "time", 4))
		return 0;
	n = split(s, ',', f, TRACE_MAX_FIELDS);
	if (n != 4)
		return fail(p, "expected 4 fields time_us,op,offset,length, got %zu", n);
	if (parse_u64(f[0], &time_us) < 0)
		return fail(p, "bad time '%s'", f[0]);
	if (csv_op(f[1], &op) < 0)
		return fail(p, "bad op '%s' (R W T F or read write trim flush)", f[1]);
	if (parse_u64(f[2], &off) < 0)
		return fail(p, "bad offset '%s'", f[2]);
	if (parse_u64(f[3], &len) < 0)
		return fail(p, "bad length '%s'", f[3]);
	return push(p, time_us, op, off, len, 0);
}

static int file_index(struct parser *p, const char *name, bool add, uint32_t *out)
{
	uint32_t i;

	for (i = 0; i < p->t->n_files; i++) {
		if (!strcmp(p->files[i], name)) {
			*out = i;
			return 0;
		}
	}
	if (!add)
		return fail(p, "file '%s' used before 'add'", name);
	if (i == TRACE_MAX_FILES)
		return fail(p, "more than %d files", TRACE_MAX_FILES);
	p->files[i] = strdup(name);
	if (!p->files[i])
		return -ENOMEM;
	p->t->n_files++;
	*out = i;
	return 0;
}

static int iolog_io(struct parser *p, uint64_t now, uint32_t file, const char *act,
		    const char *soff, const char *slen)
{
	uint64_t off, len;
	enum trace_op op;

	if (parse_u64(soff, &off) < 0)
		return fail(p, "bad offset '%s'", soff);
	if (parse_u64(slen, &len) < 0 || len > UINT32_MAX)
		return fail(p, "bad length '%s'", slen);
	if (!strcmp(act, "wait")) {
		if (p->t->format == TRACE_FMT_IOLOG2)
			p->clock_us += off;   /* v3 ignores wait, as fio does */
		return 0;
	}
	if (!strcmp(act, "read"))
		op = TRACE_OP_READ;
	else if (!strcmp(act, "write"))
		op = TRACE_OP_WRITE;
	else if (!strcmp(act, "trim"))
		op = TRACE_OP_TRIM;
	else if (!strcmp(act, "sync") || !strcmp(act, "datasync"))
		op = TRACE_OP_FLUSH;
	else
		return fail(p, "bad action '%s'", act);
	if (op == TRACE_OP_FLUSH)
		off = len = 0;
	return push(p, now, op, off, len, file);
}

static int iolog_line(struct parser *p, char *s)
{
	char *f[TRACE_MAX_FIELDS], **g = f;
	bool v3 = p->t->format == TRACE_FMT_IOLOG3;
	uint64_t now = p->clock_us;
	uint32_t file = 0;
	size_t n;
	int ret;

	n = split(s, 0, f, TRACE_MAX_FIELDS);
	if (v3) {
		if (n < 1 || parse_u64(f[0], &now) < 0)
			return fail(p, "bad timestamp '%s'", n ? f[0] : "");
		g++;
		n--;
	}
	if (n == 2) {
		bool add = !strcmp(g[1], "add");

		if (!add && strcmp(g[1], "open") && strcmp(g[1], "close"))
			return fail(p, "bad file action '%s'", g[1]);
		return file_index(p, g[0], add, &file);
	}
	if (n != 4)
		return fail(p, "expected %s'file action [offset length]'", v3 ? "'time' then " : "");
	ret = file_index(p, g[0], false, &file);
	if (ret < 0)
		return ret;
	return iolog_io(p, now, file, g[1], g[2], g[3]);
}

/* MSR Cambridge: Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime */
static int msr_line(struct parser *p, char *s)
{
	char *f[TRACE_MAX_FIELDS + 2], key[160];
	uint64_t ts, off, len, rt;
	enum trace_op op;
	uint32_t file = 0;
	size_t n;
	int ret;

	n = split(s, ',', f, TRACE_MAX_FIELDS + 1);
	if (n != 7)
		return fail(p, "expected 7 MSR fields Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime, got %zu", n);
	if (parse_u64(f[0], &ts) < 0)
		return fail(p, "bad timestamp '%s'", f[0]);
	if (!strcasecmp(f[3], "Read"))
		op = TRACE_OP_READ;
	else if (!strcasecmp(f[3], "Write"))
		op = TRACE_OP_WRITE;
	else
		return fail(p, "bad type '%s' (Read or Write)", f[3]);
	if (parse_u64(f[4], &off) < 0)
		return fail(p, "bad offset '%s'", f[4]);
	if (parse_u64(f[5], &len) < 0 || len > UINT32_MAX)
		return fail(p, "bad size '%s'", f[5]);
	if (parse_u64(f[6], &rt) < 0)
		return fail(p, "bad response time '%s'", f[6]);
	if (!p->have_t0) {
		p->t0 = ts;
		p->have_t0 = true;
	}
	if (ts < p->t0)
		return fail(p, "timestamp before the first line's");
	snprintf(key, sizeof(key), "%s/%s", f[1], f[2]);
	ret = file_index(p, key, true, &file);
	if (ret < 0)
		return ret;
	return push(p, (ts - p->t0) / 10, op, off, len, file);
}

/* "SECONDS.NANOS" -> microseconds */
static int parse_seconds(const char *s, uint64_t *us)
{
	char buf[32], *dot;
	uint64_t sec, ns = 0;
	size_t fl;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	dot = strchr(buf, '.');
	if (dot) {
		*dot = '\0';
		fl = strlen(dot + 1);
		if (fl == 0 || fl > 9 || parse_u64(dot + 1, &ns) < 0)
			return -EINVAL;
		while (fl++ < 9)
			ns *= 10;
	}
	if (parse_u64(buf, &sec) < 0 || sec > UINT64_MAX / 1000000)
		return -EINVAL;
	*us = sec * 1000000 + ns / 1000;
	return 0;
}

/* "MAJ,MIN" */
static bool is_devno(const char *s)
{
	const char *c = strchr(s, ',');

	if (!c || c == s || !c[1])
		return false;
	for (const char *q = s; *q; q++)
		if (q != c && !isdigit((unsigned char)*q))
			return false;
	return true;
}

/* blkparse: DEV CPU SEQ TIME PID ACTION RWBS [SECTOR + COUNT [PROCESS]] */
static int blk_line(struct parser *p, char *s, bool count_only, unsigned *seen)
{
	char *f[12];
	uint64_t us, sector, count, dummy;
	enum trace_op op;
	uint32_t file = 0;
	size_t n;
	int ret;

	if (!strncmp(s, "CPU", 3) || !strncmp(s, "Total", 5)) {
		p->done = true;
		return 0;
	}
	n = split(s, 0, f, 11);
	if (n < 7 || !is_devno(f[0]) || parse_u64(f[1], &dummy) < 0 ||
	    parse_u64(f[2], &dummy) < 0 || parse_seconds(f[3], &us) < 0 ||
	    parse_u64(f[4], &dummy) < 0)
		return fail(p, "not a blkparse event line (DEV CPU SEQ TIME PID ACTION RWBS ...)");
	if (strlen(f[5]) == 1 && strchr("QDC", f[5][0]))
		*seen |= 1u << (strchr("QDC", f[5][0]) - "QDC");
	if (count_only || f[5][0] != p->action || f[5][1])
		return 0;   /* another action, or a message (m) */
	if (strchr(f[6], 'N'))
		return 0;   /* no data */
	if (n >= 10 && !strcmp(f[8], "+")) {
		if (parse_u64(f[7], &sector) < 0 || parse_u64(f[9], &count) < 0 ||
		    sector > UINT64_MAX / 512 || count > UINT32_MAX / 512)
			return fail(p, "bad 'SECTOR + COUNT'");
	} else {
		sector = count = 0;
	}
	if (strchr(f[6], 'D'))
		op = TRACE_OP_TRIM;
	else if (strchr(f[6], 'W'))
		op = TRACE_OP_WRITE;
	else if (strchr(f[6], 'R'))
		op = TRACE_OP_READ;
	else if (strchr(f[6], 'F'))
		op = TRACE_OP_FLUSH;
	else
		return fail(p, "bad RWBS '%s'", f[6]);
	if (count == 0) {
		if (!strchr(f[6], 'F'))
			return fail(p, "%s of 0 sectors", f[6]);
		op = TRACE_OP_FLUSH;   /* an empty preflush */
	}
	ret = file_index(p, f[0], true, &file);
	if (ret < 0)
		return ret;
	if (op == TRACE_OP_FLUSH)
		sector = count = 0;
	return push(p, us, op, sector * 512, count * 512, file);
}

/* Two passes: which of Q, D, C the trace has, then the events of that action. */
static int blk_lines(struct parser *p, char *text)
{
	unsigned seen = 0;
	size_t len = strlen(text);
	char *copy = malloc(len + 1);
	int ret = 0;

	if (!copy)
		return -ENOMEM;
	for (int pass = 0; pass < 2 && ret == 0; pass++) {
		char *line;

		memcpy(copy, text, len + 1);
		line = copy;
		p->line = 0;
		p->done = false;
		if (pass == 1) {
			if (!seen) {
				p->line = 1;
				ret = fail(p, "no Q, D or C events");
				break;
			}
			p->action = (seen & 1) ? 'Q' : (seen & 2) ? 'D' : 'C';
		}
		while (line && *line && !p->done && ret == 0) {
			char *nl = strchr(line, '\n');

			if (nl)
				*nl = '\0';
			p->line++;
			if (nl && nl > line && nl[-1] == '\r')
				nl[-1] = '\0';
			while (*line == ' ' || *line == '\t')
				line++;
			if (*line)
				ret = blk_line(p, line, pass == 0, &seen);
			line = nl ? nl + 1 : NULL;
		}
	}
	free(copy);
	return ret;
}

static int parse_lines(struct parser *p, char *text)
{
	bool first_data = true;
	char *line = text;
	int ret = 0;

	while (line && *line) {
		char *nl = strchr(line, '\n');

		if (nl)
			*nl = '\0';
		p->line++;
		if (nl && nl > line && nl[-1] == '\r')
			nl[-1] = '\0';
		char *s = line;
		while (*s == ' ' || *s == '\t')
			s++;
		if (p->line == 1 && (p->t->format == TRACE_FMT_IOLOG2 ||
				     p->t->format == TRACE_FMT_IOLOG3)) {
			/* the version line */
		} else if (*s == '\0' || *s == '#') {
			/* blank or comment */
		} else if (p->t->format == TRACE_FMT_CSV) {
			ret = csv_line(p, s, first_data);
			first_data = false;
		} else if (p->t->format == TRACE_FMT_MSR) {
			ret = msr_line(p, s);
		} else {
			ret = iolog_line(p, s);
		}
		if (ret < 0)
			return ret;
		line = nl ? nl + 1 : NULL;
	}
	return 0;
}

/* The first non-blank, non-comment line tells MSR and blkparse from plain CSV. */
static enum trace_format sniff(const char *text)
{
	char line[512], copy[512], *f[TRACE_MAX_FIELDS + 2];
	const char *s = text;

	for (;;) {
		const char *nl = strchr(s, '\n');
		size_t n = nl ? (size_t)(nl - s) : strlen(s);

		while (n && (*s == ' ' || *s == '\t')) {
			s++;
			n--;
		}
		if (n && *s != '#') {
			if (n >= sizeof(line))
				n = sizeof(line) - 1;
			memcpy(line, s, n);
			line[n] = '\0';
			memcpy(copy, line, n + 1);
			break;
		}
		if (!nl)
			return TRACE_FMT_CSV;
		s = nl + 1;
	}
	if (split(line, ',', f, TRACE_MAX_FIELDS + 1) == 7 &&
	    (!strcasecmp(f[3], "Read") || !strcasecmp(f[3], "Write")))
		return TRACE_FMT_MSR;
	if (split(copy, 0, f, TRACE_MAX_FIELDS + 1) >= 7 && is_devno(f[0]) && strchr(f[3], '.'))
		return TRACE_FMT_BLKPARSE;
	return TRACE_FMT_CSV;
}

int trace_parse_buf(const char *buf, size_t len, struct trace *t, char *err, size_t errlen)
{
	struct parser p = { .t = t, .err = err, .errlen = errlen };
	char *text;
	int ret;

	memset(t, 0, sizeof(*t));
	if (errlen)
		err[0] = '\0';
	if (memchr(buf, '\0', len)) {
		p.line = 1;
		return fail(&p, "binary data (NUL byte) in trace");
	}
	text = malloc(len + 1);
	if (!text)
		return -ENOMEM;
	memcpy(text, buf, len);
	text[len] = '\0';

	if (!strncmp(text, "fio version 2 iolog", 19))
		t->format = TRACE_FMT_IOLOG2;
	else if (!strncmp(text, "fio version 3 iolog", 19))
		t->format = TRACE_FMT_IOLOG3;
	else if (!strncmp(text, "fio version", 11)) {
		p.line = 1;
		ret = fail(&p, "unsupported fio iolog version (2 and 3 are)");
		goto out;
	} else
		t->format = sniff(text);

	ret = t->format == TRACE_FMT_BLKPARSE ? blk_lines(&p, text) : parse_lines(&p, text);
out:
	for (uint32_t i = 0; i < TRACE_MAX_FILES; i++)
		free(p.files[i]);
	free(text);
	if (ret < 0)
		trace_free(t);
	return ret;
}

int trace_load(const char *path, struct trace *t, char *err, size_t errlen)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int fd, ret = 0;

	memset(t, 0, sizeof(*t));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return ret;
	}
	for (;;) {
		if (len == cap) {
			size_t ncap = cap ? cap * 2 : 1 << 16;
			char *nb = realloc(buf, ncap);

			if (!nb) {
				ret = -ENOMEM;
				goto out;
			}
			buf = nb;
			cap = ncap;
		}
		ssize_t r = read(fd, buf + len, cap - len);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	ret = trace_parse_buf(buf ? buf : "", len, t, err, errlen);
out:
	free(buf);
	close(fd);
	return ret;
}

void trace_free(struct trace *t)
{
	free(t->recs);
	memset(t, 0, sizeof(*t));
}

const char *trace_op_name(enum trace_op op)
{
	switch (op) {
	case TRACE_OP_READ: return "read";
	case TRACE_OP_WRITE: return "write";
	case TRACE_OP_TRIM: return "trim";
	case TRACE_OP_FLUSH: return "flush";
	}
	return "?";
}

const char *trace_format_name(enum trace_format f)
{
	switch (f) {
	case TRACE_FMT_CSV: return "csv";
	case TRACE_FMT_IOLOG2: return "iolog2";
	case TRACE_FMT_IOLOG3: return "iolog3";
	case TRACE_FMT_MSR: return "msr";
	case TRACE_FMT_BLKPARSE: return "blkparse";
	}
	return "?";
}
