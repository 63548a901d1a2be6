/* SPDX-License-Identifier: MIT */
/*
 * daemon/utf8.c - UTF-8 validation and repair (see utf8.h).  It only reads
 * and copies; it never decides what a command means.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/utf8.h"

bool tierd_utf8_valid(const char *s, size_t len, size_t *bad)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	while (i < len) {
		unsigned c = p[i], n, cp;
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			n = 1, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			n = 2, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			n = 3, cp = c & 0x07;
		else
			goto bad;
		for (unsigned k = 1; k <= n; k++) {
			if (i + k >= len || (p[i + k] & 0xc0) != 0x80)
				goto bad;
			cp = (cp << 6) | (p[i + k] & 0x3f);
		}
		/* overlong forms, surrogates, past U+10FFFF */
		if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			goto bad;
		i += n + 1;
	}
	return true;
bad:
	if (bad)
		*bad = i;
	return false;
}

char *tierd_utf8_fix(const char *s, size_t len, size_t *outlen)
{
	char *out = malloc(len * 3 + 1);   /* each bad byte: EF BF BD */
	size_t o = 0, bad;

	if (!out)
		return NULL;
	for (size_t i = 0; i < len;) {
		size_t rest = len - i;
		if (tierd_utf8_valid(s + i, rest, &bad)) {
			memcpy(out + o, s + i, rest);
			o += rest;
			break;
		}
		memcpy(out + o, s + i, bad);
		o += bad;
		memcpy(out + o, "\xef\xbf\xbd", 3);
		o += 3;
		i += bad + 1;
	}
	out[o] = '\0';
	*outlen = o;
	return out;
}
