/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz_params.c - fuzz target for tier_params_set(), the parser
 * behind the [tier] section, `tierctl config set` and the admin socket.
 * Each input line is "key=value".  Besides crashes it checks the promises of
 * tier/params.h: an error comes with a message and leaves the value alone,
 * and a value that was accepted prints (tier_params_get) as text that sets
 * the same value again.  It also runs the unit parsers on every value.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tier/params.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one(struct tier_params *p, const char *key, const char *value)
{
	struct tier_params before = *p, again;
	char err[512] = "", txt[128], txt2[128];
	uint64_t u;
	int b, rc;

	tier_parse_bytes(value, &u);
	tier_parse_ms(value, &u);
	tier_parse_u64(value, &u);
	tier_parse_bool(value, &b);
	tier_params_is_live(key);

	rc = tier_params_set(p, key, value, err, sizeof(err));
	if (rc < 0) {
		if ((rc != -ENOENT && rc != -EINVAL && rc != -ERANGE) || !err[0])
			abort();
		if (memcmp(&before, p, sizeof(before)) != 0)
			abort();   /* a refused value must change nothing */
		return;
	}
	if (rc != 0 || tier_params_get(p, key, txt, sizeof(txt)) != 0)
		abort();
	tier_params_default(&again);
	if (tier_params_set(&again, key, txt, err, sizeof(err)) != 0)
		abort();   /* what get prints, set must take */
	if (tier_params_get(&again, key, txt2, sizeof(txt2)) != 0 || strcmp(txt, txt2) != 0)
		abort();
}

static void visit(void *arg, const char *key, const char *value)
{
	(void)arg;
	if (!key[0] || !value[0])
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tier_params p;
	char err[512];
	size_t pos = 0;

	tier_params_default(&p);
	while (pos < size) {
		const uint8_t *nl = memchr(data + pos, '\n', size - pos);
		size_t n = nl ? (size_t)(nl - (data + pos)) : size - pos;
		/* exact-size copy: ASan catches a read past the value's NUL */
		char *line = malloc(n + 1), *eq;

		if (!line)
			return 0;
		memcpy(line, data + pos, n);
		line[n] = '\0';
		eq = strchr(line, '=');
		if (eq) {
			*eq = '\0';
			one(&p, line, eq + 1);
		} else {
			one(&p, line, NULL);
		}
		free(line);
		pos += n + 1;
	}
	if (tier_params_check(&p, err, sizeof(err)) < 0 && !err[0])
		abort();
	tier_params_foreach(&p, visit, NULL);
	return 0;
}
