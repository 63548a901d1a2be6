/* SPDX-License-Identifier: MIT */
/*
 * daemon/log.h - where tierd's lines go: stderr as plain text, or, under
 * systemd (JOURNAL_STREAM names our stderr), journald entries with fields
 * (IMAGE=, POOL=, OBJECT=, OP=, ERRNO=) for the engine's failure records;
 * and the audit lines of admin commands that change state.
 */
#ifndef TIERD_LOG_H
#define TIERD_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "tier/engine.h"

/* stderr is the journal's stream (JOURNAL_STREAM's device:inode match fd 2). */
bool tierd_log_under_journal(void);
/*
 * One failure record: with journal and libsystemd an entry with its fields
 * (sd_journal_sendv; on failure the plain line below), else
 * "tierd: LEVEL: msg" on stderr.
 */
void tierd_log_emit(bool journal, const struct tier_log_rec *r);
/* Admin commands worth an audit line: reload, config set, flush, evict, promote. */
bool tierd_audit_wanted(const char *line);
/*
 * "audit: uid U pid P: 'LINE' -> ok|failed: ANSWER" at INFO through log
 * (unprintable bytes of the line shown as '?'); answer is the JSON reply.
 */
void tierd_audit(tier_log_fn log, void *arg, uid_t uid, pid_t pid, const char *line,
		 const char *answer, size_t answer_len);

#endif
