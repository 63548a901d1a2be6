/* SPDX-License-Identifier: MIT */
/*
 * daemon/admin-internal.h - shared between admin.c (socket, connections),
 * admin-cmd.c (commands) and admin-perf.c (perf dump / perf schema).  Answers
 * are jansson values; text is made from them only by json_dumps.  Not part
 * of the daemon's interface.
 */
#ifndef TIERD_ADMIN_INTERNAL_H
#define TIERD_ADMIN_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/admin.h"

#define ADMIN_MAX_LINE 4096
#define ADMIN_MAX_QUEUED (256u * 1024)     /* answer bytes queued: stop reading */
#define ADMIN_MAX_CONNS 64
#define ADMIN_DEFAULT_TIMEOUT_MS 10000u
#define RATE_SAMPLES 6     /* one a second: throughput over the last ~5 s */

struct rate_sample {
	uint64_t t_ms;
	uint64_t read_ops, write_ops, read_bytes, write_bytes;
};

struct admin_conn;

struct tierd_admin {
	uv_loop_t *loop;
	uv_pipe_t server;
	uv_timer_t timer;
	struct tierd_admin_hooks hooks;
	char *path;
	ino_t ino;
	struct admin_conn *conns;
	size_t n_conns;
	uint64_t timeout_ms;         /* idle / unread answers: the connection closes */
	unsigned open_handles;
	struct rate_sample rate[RATE_SAMPLES];
	size_t rate_n, rate_head;
};

/* json_dumps flags of every answer (reals to 10 significant digits). */
#define TIERD_JSON_FLAGS (JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10))

/*
 * Run one tierctl command line of len bytes (no terminator inside).  Returns
 * the answer (a new reference: an object, {"error": ...} for any failure), or
 * NULL only when out of memory.
 */
json_t *tierd_admin_run_line(struct tierd_admin *a, const char *line, size_t len);
/*
 * Run one command in the ceph admin-socket form: a JSON object with
 * "prefix" (e.g. "perf dump") and the command's named arguments.  *pretty is
 * set unless the command asked for "format": "json".  Same return as above.
 */
json_t *tierd_admin_run_ceph(struct tierd_admin *a, const char *cmd, size_t len, bool *pretty);
/* {"error": MESSAGE} (NULL on ENOMEM). */
json_t *tierd_admin_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A JSON string of any bytes: invalid UTF-8 becomes U+FFFD (NULL on ENOMEM). */
json_t *tierd_admin_str(const char *s);
/* Record a throughput sample (called once a second). */
void tierd_admin_sample_rate(struct tierd_admin *a);

/*
 * admin-perf.c: the counters in Ceph's perf-counter layout.  logger / counter
 * (NULL = all) select one section / one counter as `ceph daemon ... perf dump
 * LOGGER COUNTER` does.  NULL on ENOMEM; {"error"} for an unknown logger.
 */
json_t *tierd_admin_perf_dump(struct tierd_admin *a, struct tier_engine *e,
			      const char *logger, const char *counter);
json_t *tierd_admin_perf_schema(struct tierd_admin *a, struct tier_engine *e,
				const char *logger, const char *counter);

#endif
