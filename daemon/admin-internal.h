/* SPDX-License-Identifier: MIT */
/*
 * daemon/admin-internal.h - shared between admin.c (socket, connections) and
 * admin-cmd.c (commands, JSON).  Not part of the daemon's interface.
 */
#ifndef TIERD_ADMIN_INTERNAL_H
#define TIERD_ADMIN_INTERNAL_H

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

/* A growing JSON answer; oom set when an allocation failed. Caller frees p. */
struct jbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

void tierd_admin_jb_printf(struct jbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Replace the answer with {"error": "..."}. */
void tierd_admin_jb_error(struct jbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Run one command line (modified in place) and write its answer into out. */
void tierd_admin_run_line(struct tierd_admin *a, char *line, struct jbuf *out);
/* Record a throughput sample (called once a second). */
void tierd_admin_sample_rate(struct tierd_admin *a);

#endif
