/* SPDX-License-Identifier: MIT */
/*
 * daemon/nbd.h - tierd's NBD server on a libuv loop.  Serves libtier images
 * (exports) to NBD clients over TCP and unix sockets: fixed newstyle
 * handshake, many requests in flight per connection, out-of-order replies.
 * Everything runs on the loop thread that owns the engine.
 */
#ifndef TIERD_NBD_H
#define TIERD_NBD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <uv.h>

#include "tier/engine.h"

struct tierd_busy_poll;

struct nbd_server;

/* NBD_OPT_STARTTLS: off (NBD_REP_ERR_POLICY), on (the client's choice),
 * require (every option but STARTTLS and ABORT gets NBD_REP_ERR_TLS_REQD). */
enum nbd_tls_mode { NBD_TLS_OFF = 0, NBD_TLS_ON, NBD_TLS_REQUIRE };

struct nbd_server_opts {
	uv_loop_t *loop;
	/* Backpressure per connection: stop reading the socket while this many
	 * requests / payload bytes are in flight.  0 = defaults (64, 64 MiB). */
	uint32_t max_requests_per_conn;
	uint64_t max_bytes_per_conn;
	/* A client that has not finished option haggling this long after
	 * connecting is disconnected.  0 = default (30 s). */
	uint64_t handshake_timeout_ms;
	/* Connections served at once; more are accepted and closed at once,
	 * before the handshake.  0 = RLIMIT_NOFILE minus a reserve (a quarter,
	 * at least 64) for store I/O and the rest of the daemon. */
	uint32_t max_connections;
	/* Request payload bytes in flight across all connections: a new
	 * request is read only while the largest one fits (backpressure, no
	 * error).  0 = 512 MiB. */
	uint64_t max_bytes_in_flight;
	/* A WRITE's payload (or a refused one's) must arrive within this, or
	 * the connection is closed.  0 = 30 s. */
	uint64_t transmission_timeout_ms;
	/* Unix listeners: mode (0 = 0660) and group (socket_gid_set). */
	unsigned socket_mode;
	bool socket_gid_set;
	gid_t socket_gid;
	tier_log_fn log;      /* may be NULL; called from the I/O thread too */
	void *log_arg;
	/*
	 * threads > 1: the server runs on a loop and thread of its own
	 * (nbd-thread.c), started by nbd_server_start; loop above is then the
	 * engine's, where requests are submitted and tier_cq_drain runs.
	 */
	bool io_thread;
	uint32_t busy_poll_us;     /* io_thread: its loop's busy-poll (daemon/busy-poll.h) */
	/* TLS (nbd-tls.c); certificates: a directory with server-cert.pem,
	 * server-key.pem and ca-cert.pem; psk_file: psktool's format. */
	enum nbd_tls_mode tls;
	const char *tls_certificates, *tls_psk_file, *tls_priority;
	bool tls_verify_peer;      /* require a client certificate from the CA */
	char *err;                 /* may be NULL: why create failed */
	size_t errlen;
};

/* -EINVAL (bad TLS settings: o->err says why), -ENOENT, -ENOMEM.  *out
 * NULL on failure. */
int nbd_server_create(const struct nbd_server_opts *o, struct nbd_server **out);

/* The I/O thread's busy-poll (its counters); NULL without an I/O thread. */
const struct tierd_busy_poll *nbd_server_busy_poll(const struct nbd_server *s);

/*
 * io_thread: start the server's thread (after the listeners and exports are
 * set up; before, every call runs on the caller's thread).  Else a no-op.
 * 0 or -errno.
 */
int nbd_server_start(struct nbd_server *s);
bool nbd_server_threaded(const struct nbd_server *s);
/*
 * Run fn(arg) on the server's thread and return once it has run (at once
 * when not threaded, not started, or called from that thread).  For calls
 * not listed as safe from the daemon's thread, e.g. nbd_server_cut.
 */
void nbd_server_exec(struct nbd_server *s, void (*fn)(void *arg), void *arg);

/*
 * Listen on "unix:/path" (a stale socket file is replaced) or "host:port"
 * (IPv4 or [IPv6]:port).  -EINVAL for a malformed address, else the
 * -errno of socket/bind/listen.
 */
int nbd_server_listen(struct nbd_server *s, const char *addr);
/*
 * A TCP listen address, HOST:PORT or [IPV6]:PORT with a numeric host, into
 * ss and len: 0, or -EINVAL.  The listener and `tierd --check` share it.
 */
int nbd_parse_tcp_addr(const char *addr, struct sockaddr_storage *ss, socklen_t *len);

/*
 * Serve img under its tier_image_name().  The name is copied; img must stay
 * open until nbd_server_destroy.  The first export added also answers the
 * default (empty) export name.  -EEXIST, -ENOMEM.  @pre before nbd_server_start.
 * The calls below (to nbd_server_shutdown, and the counters) are safe from the
 * daemon's thread: with an I/O thread they run there (nbd_server_exec).
 */
int nbd_server_add_export(struct nbd_server *s, struct tier_image *img, bool read_only);
/* Live: connected clients' writes now fail with EPERM; new ones see NBD_FLAG_READ_ONLY. */
int nbd_server_set_read_only(struct nbd_server *s, const char *name, bool read_only);
/*
 * Close every connection to export `name` at once, answering nothing more
 * (the image went to another daemon, or was fenced): requests the engine
 * still runs finish there, their answers dropped; a client that reconnects
 * sends again what was not answered.  Returns how many were closed.
 */
size_t nbd_server_close_export(struct nbd_server *s, const char *name, const char *why);

/* Change the backpressure caps (config reload); applies to new decisions. */
void nbd_server_set_limits(struct nbd_server *s, uint32_t max_requests,
			   uint64_t max_bytes);

/* Change the handshake deadline (0 = default); applies to connections
 * accepted afterwards. */
void nbd_server_set_handshake_timeout(struct nbd_server *s, uint64_t ms);

/*
 * Stop accepting, stop reading new requests, let requests already read
 * complete and their replies go out, then close every connection.
 * done(arg) runs once no connection is left (possibly inside this call);
 * io_thread: on the engine's loop, never inside this call.
 */
void nbd_server_shutdown(struct nbd_server *s, void (*done)(void *arg), void *arg);

/*
 * Replies made between begin and end are gathered: one write per connection
 * at the end (up to NBD_GATHER_MAX replies each) instead of one per reply.
 * The daemon brackets each drain of the completion queue.  Nests; NULL is a
 * no-op.
 */
void nbd_server_batch_begin(struct nbd_server *s);
void nbd_server_batch_end(struct nbd_server *s);
/* Connections open / requests in flight right now (from any thread). */
size_t nbd_server_connections(const struct nbd_server *s);
size_t nbd_server_in_flight(const struct nbd_server *s);
/* The connection limit in force; connections refused by it so far. */
size_t nbd_server_max_connections(const struct nbd_server *s);
uint64_t nbd_server_refused(const struct nbd_server *s);

/*
 * Shutdown took too long: close every connection still open (a client that
 * stopped reading its replies).  Requests inside the engine still complete
 * (their writes are as safe as acknowledged ones); their replies are dropped.
 */
void nbd_server_cut(struct nbd_server *s);

/*
 * Free the server.  @pre nbd_server_shutdown's done callback has run and the
 * loop has run once more so libuv close callbacks finished.  NULL ok.
 */
void nbd_server_destroy(struct nbd_server *s);

#endif
