/* SPDX-License-Identifier: MIT */
/*
 * daemon/audit.c - the audit lines of admin commands that change state
 * (reload, config set, flush, evict, promote): who asked (the peer's uid and
 * pid from SO_PEERCRED, taken at accept), what, and whether it worked.  It
 * decides which commands are audited and how the line reads; it never
 * changes a command or its answer.
 */
#include <stdio.h>
#include <string.h>

#include "daemon/log.h"

bool tierd_audit_wanted(const char *line)
{
	static const char *const cmds[] = { "reload", "flush", "evict", "promote" };
	size_t n;

	line += strspn(line, " \t");
	n = strcspn(line, " \t\r");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (n == strlen(cmds[i]) && !strncmp(line, cmds[i], n))
			return true;
	if (n == 6 && !strncmp(line, "config", 6)) {
		line += n;
		line += strspn(line, " \t");
		return !strncmp(line, "set", 3) && (!line[3] || strchr(" \t\r", line[3]));
	}
	return false;
}

void tierd_audit(tier_log_fn log, void *arg, uid_t uid, pid_t pid, const char *line,
		 const char *answer, size_t answer_len)
{
	char cmd[201], ans[201], msg[600];
	size_t i, k;
	bool failed;

	if (!log)
		return;
	for (i = 0; line[i] && i < sizeof(cmd) - 1; i++)
		cmd[i] = line[i] >= 0x20 && line[i] < 0x7f ? line[i] : '?';
	cmd[i] = 0;
	for (k = 0; k < answer_len && k < sizeof(ans) - 1; k++)
		ans[k] = answer[k] >= 0x20 && answer[k] < 0x7f ? answer[k] : ' ';
	ans[k] = 0;
	while (k && ans[k - 1] == ' ')
		ans[--k] = 0;
	failed = strstr(ans, "\"error\"") != NULL;
	snprintf(msg, sizeof(msg), "audit: uid %lu pid %ld: '%s' -> %s%s%s",
		 (unsigned long)uid, (long)pid, cmd, failed ? "failed: " : "ok",
		 failed ? ans : "", failed && answer_len >= sizeof(ans) ? "..." : "");
	log(arg, TIER_LOG_INFO, msg);
}
