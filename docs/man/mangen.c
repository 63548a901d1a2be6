/* SPDX-License-Identifier: MIT */
/*
 * mangen.c - writes a man page from its template (docs/man/NAME.in) and the
 * tables the code runs on: the config parser's keys (daemon/config.c
 * tierd_config_key_info) and the [tier] parameter table (libtier/params.c),
 * so a key's name, default, allowed values and whether a reload applies it
 * cannot drift from the page.  The prose is the template's, and each key's
 * paragraph is the comment above it in deploy/tierd.conf.example (the
 * example every key is shown in, with its note).  It decides only how a
 * key is written in roff; it must never hold a key, default or range of
 * its own.
 *
 * Usage: mangen TEMPLATE OUTPUT [EXAMPLE].  Template lines that are exactly
 *   @KEYS SECTION@        one entry per key of that section (global, local,
 *                         rados, tier, image.NAME)
 *   @RELOAD_LIVE@         the keys outside [tier] a reload applies, as a list
 *   @TIER_RESTART@        the [tier] keys a running engine cannot take
 *   @PRESETS@             one entry per tier_preset
 * are replaced; @VERSION@ anywhere becomes the version.  Exit 0, or 1 with
 * a message (an unknown directive, a section without keys, I/O).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <config.h>

#include "daemon/config.h"
#include "tier/params.h"

/* Roff-safe text: backslashes and hyphens escaped, no control at a line start. */
static void put_text(FILE *o, const char *s)
{
	if (*s == '.' || *s == '\'')
		fputs("\\&", o);
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\e", o);
		else if (*s == '-')
			fputs("\\-", o);
		else
			fputc(*s, o);
	}
}

/*
 * The example's notes: the comment lines right above a (commented-out) key
 * describe it and the keys that follow it before the next comment; the
 * first of such a group carries the text, the others name the first.
 */
struct note {
	char section[32], key[48], first[48];
	char *text;
};
static struct note *notes;
static size_t n_notes;

static void notes_free(void)
{
	for (size_t i = 0; i < n_notes; i++)
		free(notes[i].text);
	free(notes);
}

/* 0, or -errno (the file, memory). */
static int notes_load(const char *path)
{
	char line[1024], sec[32] = "", key[48], first[48] = "", *text = NULL;
	size_t tlen = 0;
	FILE *f = fopen(path, "r");
	int r = 0;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		size_t n = strcspn(line, "\n");
		struct note *nn;

		line[n] = '\0';
		if (sscanf(line, "[%31[a-z]", sec) == 1 || sscanf(line, "#[%31[a-z]", sec) == 1 ||
		    n == 0) {
			free(text);
			text = NULL;
			tlen = 0;
			first[0] = '\0';
			continue;
		}
		if (sscanf(line, "#%47[a-z_] =", key) == 1 || sscanf(line, "%47[a-z_] =", key) == 1) {
			if (!sec[0])
				continue;
			nn = realloc(notes, (n_notes + 1) * sizeof(*notes));
			if (!nn) {
				r = -ENOMEM;
				break;
			}
			notes = nn;
			nn = &notes[n_notes++];
			snprintf(nn->section, sizeof(nn->section), "%s", sec);
			snprintf(nn->key, sizeof(nn->key), "%s", key);
			snprintf(nn->first, sizeof(nn->first), "%s", first[0] ? first : key);
			nn->text = text;   /* owned by the note now */
			if (text)
				snprintf(first, sizeof(first), "%s", key);
			text = NULL;
			tlen = 0;
			continue;
		}
		if (line[0] == '#') {
			const char *t = line[1] == ' ' ? line + 2 : line + 1;
			char *nt = realloc(text, tlen + strlen(t) + 2);

			if (!nt) {
				r = -ENOMEM;
				break;
			}
			text = nt;
			tlen += (size_t)sprintf(text + tlen, "%s%s", tlen ? " " : "", t);
			first[0] = '\0';
		}
	}
	free(text);
	fclose(f);
	return r;
}

static const struct note *note_of(const char *section, const char *key)
{
	if (!strcmp(section, "image.NAME"))
		section = "image";
	for (size_t i = 0; i < n_notes; i++)
		if (!strcmp(notes[i].section, section) && !strcmp(notes[i].key, key))
			return &notes[i];
	return NULL;
}

static int put_keys(FILE *o, const char *section)
{
	struct tierd_config_key k;
	int n = 0, r;

	for (size_t i = 0; (r = tierd_config_key_info(i, &k)) == 0; i++) {
		const struct note *no;

		if (strcmp(k.section, section))
			continue;
		fputs(".TP\n.B ", o);
		put_text(o, k.key);
		fputs("\n", o);
		no = note_of(k.section, k.key);
		if (no && no->text) {
			put_text(o, no->text);
			fputs("\n.br\n", o);
		} else if (no && strcmp(no->first, k.key)) {
			fputs("See \\fB", o);
			put_text(o, no->first);
			fputs("\\fR above.\n.br\n", o);
		}
		fputs("Default: ", o);
		if (k.def[0]) {
			fputs("\\fB", o);
			put_text(o, k.def);
			fputs("\\fR", o);
		} else {
			fputs("none", o);
		}
		fputs(".\nAllowed: ", o);
		put_text(o, k.allowed);
		fputs(".\n", o);
		fputs(k.live ? "Live: a reload applies it.\n"
			     : "Restart: it takes effect at the next start.\n", o);
		n++;
	}
	if (r != -ENOENT)
		return r;
	return n ? 0 : -ENOENT;
}

/* The keys of [tier] (tier) or of the other sections whose live flag is live: a list. */
static int put_list(FILE *o, bool tier, bool live)
{
	struct tierd_config_key k;
	int n = 0, r;

	for (size_t i = 0; (r = tierd_config_key_info(i, &k)) == 0; i++) {
		if ((strcmp(k.section, "tier") == 0) != tier || k.live != live)
			continue;
		fputs(n ? ",\n" : "", o);
		fputs("\\fB", o);
		put_text(o, k.key);
		fputs("\\fR", o);
		n++;
	}
	fputs(n ? ".\n" : "none.\n", o);
	return r == -ENOENT ? 0 : r;
}

static void put_presets(FILE *o)
{
	const char *name, *what;

	for (size_t i = 0; (name = tier_params_preset_info(i, &what)); i++) {
		fputs(".TP\n.B ", o);
		put_text(o, name);
		fputs("\n", o);
		put_text(o, what ? what : "");
		fputs("\n", o);
	}
}

/* Copy line to o with @VERSION@ replaced. */
static void put_line(FILE *o, const char *line)
{
	const char *v;

	while ((v = strstr(line, "@VERSION@"))) {
		fwrite(line, 1, (size_t)(v - line), o);
		fputs(TIER_VERSION, o);
		line = v + strlen("@VERSION@");
	}
	fputs(line, o);
}

int main(int argc, char **argv)
{
	char line[4096], sec[64];
	FILE *in = NULL, *o = NULL;
	int rc = 1, lineno = 0;

	if (argc != 3 && argc != 4) {
		fprintf(stderr, "usage: mangen TEMPLATE OUTPUT [EXAMPLE]\n");
		return 2;
	}
	if (argc == 4 && (rc = notes_load(argv[3])) < 0) {
		fprintf(stderr, "mangen: %s: %s\n", argv[3], strerror(-rc));
		notes_free();
		return 1;
	}
	rc = 1;
	in = fopen(argv[1], "r");
	o = fopen(argv[2], "w");
	if (!in || !o) {
		fprintf(stderr, "mangen: %s: %s\n", in ? argv[2] : argv[1], strerror(errno));
		goto out;
	}
	while (fgets(line, sizeof(line), in)) {
		int r = 0;

		lineno++;
		if (line[0] != '@' || strcmp(line, "@VERSION@\n") == 0) {
			put_line(o, line);
			continue;
		}
		if (sscanf(line, "@KEYS %63[^@]@", sec) == 1)
			r = put_keys(o, sec);
		else if (strcmp(line, "@RELOAD_LIVE@\n") == 0)
			r = put_list(o, false, true);
		else if (strcmp(line, "@TIER_RESTART@\n") == 0)
			r = put_list(o, true, false);
		else if (strcmp(line, "@PRESETS@\n") == 0)
			put_presets(o);
		else
			r = -EINVAL;
		if (r < 0) {
			fprintf(stderr, "mangen: %s:%d: %s: %s", argv[1], lineno,
				r == -EINVAL ? "unknown directive" : strerror(-r), line);
			goto out;
		}
	}
	if (ferror(in)) {
		fprintf(stderr, "mangen: %s: read error\n", argv[1]);
		goto out;
	}
	rc = 0;
out:
	if (in)
		fclose(in);
	if (o && fclose(o) != 0 && rc == 0) {
		fprintf(stderr, "mangen: %s: %s\n", argv[2], strerror(errno));
		rc = 1;
	}
	if (rc)
		remove(argv[2]);
	notes_free();
	return rc;
}
