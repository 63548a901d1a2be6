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
		if (p->line == 1 && p->t->format != TRACE_FMT_CSV) {
			/* the version line */
		} else if (*s == '\0' || *s == '#') {
			/* blank or comment */
		} else if (p->t->format == TRACE_FMT_CSV) {
			ret = csv_line(p, s, first_data);
			first_data = false;
		} else {
			ret = iolog_line(p, s);
		}
		if (ret < 0)
			return ret;
		line = nl ? nl + 1 : NULL;
	}
	return 0;
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
		t->format = TRACE_FMT_CSV;

	ret = parse_lines(&p, text);
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
	}
	return "?";
}
