/* SPDX-License-Identifier: MIT */
/*
 * daemon/log.c - tierd's log sinks: the engine's failure records as
 * journald entries with fields when stderr is the journal, plain lines
 * otherwise, and the audit lines of state-changing admin commands (who:
 * the peer's uid and pid from SO_PEERCRED).  It decides the shape of a
 * line, never whether an event is logged (the engine rate-limits its
 * failures); it must never block the loop on a slow sink beyond a write.
 */
#include <config.h>   /* HAVE_SYSTEMD */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#if HAVE_SYSTEMD
#include <systemd/sd-journal.h>
#endif

#include "daemon/log.h"

static const char *const level_names[] = { "error", "warn", "info", "debug" };
static const int level_prio[] = { 3, 4, 6, 7 };   /* syslog levels */

bool tierd_log_under_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

#if HAVE_SYSTEMD
static bool journal_send(const struct tier_log_rec *r, unsigned l)
{
	char f[10][640];
	struct iovec iov[10];
	int n = 0;

#define FIELD(...) do { \
		snprintf(f[n], sizeof(f[n]), __VA_ARGS__); \
		iov[n].iov_base = f[n]; \
		iov[n].iov_len = strlen(f[n]); \
		n++; \
	} while (0)
	FIELD("MESSAGE=%s", r->msg);
	FIELD("PRIORITY=%d", level_prio[l]);
	FIELD("SYSLOG_IDENTIFIER=tierd");
	if (r->op)
		FIELD("OP=%s", r->op);
	if (r->image)
		FIELD("IMAGE=%s", r->image);
	if (r->pool)
		FIELD("POOL=%s", r->pool);
	if (r->object)
		FIELD("OBJECT=%s", r->object);
	if (r->err) {
		FIELD("ERRNO=%d", r->err);
		FIELD("ERRNO_NAME=%s", tier_errno_name(r->err));
	}
#undef FIELD
	return sd_journal_sendv(iov, n) >= 0;
}
#endif

void tierd_log_emit(bool journal, const struct tier_log_rec *r)
{
	unsigned l = (unsigned)r->lvl > TIER_LOG_DEBUG ? TIER_LOG_DEBUG : (unsigned)r->lvl;

#if HAVE_SYSTEMD
	if (journal && journal_send(r, l))
		return;
#endif
	if (journal)
		fprintf(stderr, "<%d>%s\n", level_prio[l], r->msg);
	else
		fprintf(stderr, "tierd: %s: %s\n", level_names[l], r->msg);
}
