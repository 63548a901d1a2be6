/* SPDX-License-Identifier: MIT */
/*
 * daemon/utf8.h - UTF-8 checks for text that leaves the daemon (JSON
 * answers, Prometheus label values): bytes a client or a config file gave
 * are shown, never passed on as invalid text.
 */
#ifndef TIERD_UTF8_H
#define TIERD_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Whether s[0..len) is UTF-8 (no overlong forms, surrogates or code points
 * past U+10FFFF); if not and bad is non-NULL, *bad = offset of the first bad byte. */
bool tierd_utf8_valid(const char *s, size_t len, size_t *bad);
/* A malloc'd, NUL-terminated copy of s[0..len) with each bad byte replaced
 * by U+FFFD; *outlen its length.  NULL on ENOMEM. */
char *tierd_utf8_fix(const char *s, size_t len, size_t *outlen);

#endif
