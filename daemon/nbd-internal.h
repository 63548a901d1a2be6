/* SPDX-License-Identifier: MIT */
/*
 * daemon/nbd-internal.h - structures shared by nbd.c (transmission, pools,
 * connection lifetime) and nbd-handshake.c (listeners, option haggling).
 * Not for other modules.
 */
#ifndef TIERD_NBD_INTERNAL_H
#define TIERD_NBD_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "daemon/nbd.h"
#include "daemon/nbd-protocol.h"
#include "tier/engine.h"

#define NBD_RBUF_SIZE             (256u * 1024)      /* per-connection input buffer */
#define NBD_OPT_MAX               8192u              /* option data we buffer */
#define NBD_OPT_DISCARD_MAX       (1u << 20)         /* beyond this: garbage, close */
#define NBD_BUF_MIN               4096u
#define NBD_BUF_CLASSES           15                 /* 4 KiB .. 64 MiB */
#define NBD_POOL_MAX_BYTES        (256ull << 20)     /* free buffers kept */
#define NBD_DEFAULT_MAX_REQUESTS  64u
#define NBD_DEFAULT_MAX_BYTES     (64ull << 20)
#define NBD_DEFAULT_HS_TIMEOUT_MS 30000u
#define NBD_HS_MAX_WRITES         64u      /* option replies queued: stop reading */
#define NBD_GATHER_MAX            32u      /* replies gathered into one write */
#define NBD_DEFAULT_TOTAL_BYTES   (512ull << 20)
#define NBD_DEFAULT_TX_TIMEOUT_MS 30000u
#define NBD_FD_RESERVE_MIN        64u      /* descriptors kept for stores, logs, admin */

_Static_assert((NBD_BUF_MIN << (NBD_BUF_CLASSES - 1)) == NBD_MAX_BLOCK_SIZE,
	       "buffer classes must reach the largest payload");

enum nbd_conn_state {
	NBD_CS_CLIENT_FLAGS = 0,   /* waiting for the client's 32-bit flags */
	NBD_CS_OPT_HDR,            /* option haggling */
	NBD_CS_OPT_DISCARD,        /* skipping an oversized option's data */
	NBD_CS_REQ_HDR,            /* transmission: next request header */
	NBD_CS_REQ_PAYLOAD,        /* receiving a WRITE payload into cur->buf */
	NBD_CS_REQ_DISCARD,        /* skipping a refused WRITE's payload */
};

struct nbd_export {
	struct nbd_export *next;
	char *name;
	struct tier_image *img;
	uint64_t size;
	bool read_only;
	uint16_t eflags;
	/* bumped when its connections are closed (nbd_server_close_export, on
	 * the I/O thread while the engine's waits): a request of an older
	 * generation is not submitted (threads > 1: it may be on its way) */
	uint32_t gen;
};

struct nbd_conn;

struct nbd_req {
	struct tier_request t;
	struct nbd_conn *c;
	uint64_t cookie;          /* wire order, echoed */
	uint64_t offset;
	uint32_t count;
	uint16_t cmd, flags;
	uint32_t err;             /* NBD error decided before submit */
	uint64_t charge;          /* bytes counted against the connection */
	void *buf;
	unsigned buf_class;
	struct nbd_req *out_next;  /* reply queue of a batch, then its write's chain */
	struct nbd_req *x_next;    /* threads > 1: on the way to the engine or back */
	int x_result;              /* ... the engine's result */
	uint32_t gen;              /* its export's gen when it was read */
	uint16_t hdr_len;          /* reply header bytes in hdr */
	bool send_data;            /* the reply carries buf[0..count) */
	/* everything from here on is not cleared by req_get */
	uv_write_t wr;
	union {
		struct nbd_simple_reply simple;
		struct {
			struct nbd_structured_reply h;
			union {
				struct nbd_structured_reply_offset_data od;
				struct nbd_structured_reply_error err;
			} u;
		} __attribute__((packed)) sr;
	} hdr;
	struct nbd_req *next_free;
};

struct nbd_freebuf {
	struct nbd_freebuf *next;
};

struct nbd_conn {
	union {
		uv_handle_t handle;
		uv_stream_t stream;
		uv_tcp_t tcp;
		uv_pipe_t pipe;
	} h;
	struct nbd_server *s;
	struct nbd_conn *prev, *next;
	uint64_t id;
	enum nbd_conn_state state;
	bool no_zeroes, structured;
	bool paused, in_process, closing, draining, handle_closing;
	/* handshake deadline; the conn is freed once every handle is closed */
	uv_timer_t hs_timer;
	bool hs_timer_inited;
	unsigned handles_open;
	struct nbd_export *exp;
	/* input */
	uint8_t *rbuf;
	size_t rpos, rlen, rcap;
	uint32_t opt, optlen;        /* option being skipped */
	uint64_t discard_left;
	struct nbd_req *cur;         /* WRITE whose payload is arriving */
	uint32_t payload_got;
	/* accounting */
	uint32_t in_flight;          /* requests taken and not yet released */
	uint64_t in_bytes;           /* their payload bytes */
	uint32_t engine_pending;     /* of those, inside the engine */
	uint32_t writes_pending;     /* uv_write calls not yet completed */
	/* replies made during a batch (nbd_server_batch_begin), sent at its end */
	struct nbd_req *out_head, *out_tail;
	struct nbd_conn *out_next;
	bool out_listed;
	struct nbd_tls_conn *tls;    /* after STARTTLS (nbd-tls.c), else NULL */
	/* nbd-status.c: base:allocation selected for meta_exp */
	struct nbd_export *meta_exp;
	bool meta_alloc;
	char peer[96];               /* nbd-log.c: who, for the connection lines */
};

struct nbd_listener {
	union {
		uv_handle_t handle;
		uv_stream_t stream;
		uv_tcp_t tcp;
		uv_pipe_t pipe;
	} h;
	struct nbd_server *s;
	struct nbd_listener *next;
	bool is_tcp, inited, closed;
	char *path;                  /* unix socket path to unlink */
	ino_t ino;                   /* ... if it is still ours */
	char *addr;
};

struct nbd_tls;

struct nbd_server {
	uv_loop_t *loop;
	struct nbd_tls *tls;         /* credentials; NULL = tls off */
	tier_log_fn log;
	void *log_arg;
	uint32_t max_requests;
	uint64_t max_bytes;
	uint64_t hs_timeout_ms;
	/* limits across connections (nbd-handshake.c) */
	size_t max_conns;            /* beyond: refused before the handshake */
	uint64_t max_total_bytes;    /* request bytes in flight, all connections */
	uint64_t bytes_in_flight;
	uint64_t tx_timeout_ms;      /* a WRITE payload must arrive within this */
	uint64_t refused_conns;
	uint64_t last_refusal_log_ms;
	unsigned sock_mode;          /* unix listeners */
	gid_t sock_gid;              /* (gid_t)-1 = keep */
	struct nbd_export *exports;
	struct nbd_listener *listeners;
	size_t n_listeners_open;
	struct nbd_conn *conns;
	size_t n_conns;
	uint64_t next_conn_id;
	size_t in_flight;
	/* pools */
	struct nbd_req *free_reqs;
	struct nbd_freebuf *free_bufs[NBD_BUF_CLASSES];
	size_t pool_bytes;
	/* reply batching: connections with queued replies */
	unsigned batch_depth;
	struct nbd_conn *out_conns;
	/* threads > 1: the server's own loop and thread (nbd-thread.c), else NULL */
	struct nbd_xt *xt;
	/* shutdown */
	bool shutting_down;
	void (*done)(void *arg);
	void *done_arg;
};

void nbd__log(struct nbd_server *s, enum tier_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
struct nbd_export *nbd__find_export(struct nbd_server *s, const char *name);
void nbd__server_check_done(struct nbd_server *s);

void nbd__conn_accept(struct nbd_server *s, uv_stream_t *listener, bool is_tcp);
void nbd__conn_process(struct nbd_conn *c);
void nbd__conn_resume(struct nbd_conn *c);
void nbd__conn_close(struct nbd_conn *c, const char *why);
void nbd__conn_drain(struct nbd_conn *c);
void nbd__conn_maybe_finish(struct nbd_conn *c);
void nbd__alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf);
void nbd__read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

/* nbd-handshake.c */
void nbd__handshake_start(struct nbd_conn *c);
/* Option haggling is over: serve x from now on (stops the deadline). */
void nbd__handshake_finish(struct nbd_conn *c, struct nbd_export *x);
/* One handshake step on buffered input: 1 progressed, 0 needs more, -1 closing. */
int nbd__handshake_step(struct nbd_conn *c);
void nbd__listeners_close(struct nbd_server *s);
void nbd__listeners_free(struct nbd_server *s);
/* Limits across connections: set from the options (0 = defaults). */
void nbd__server_limits_init(struct nbd_server *s, const struct nbd_server_opts *o);
/* Is the global request-byte budget too low for one more request? */
bool nbd__global_over(const struct nbd_server *s);
/* Request bytes given back: resume connections paused on the budget. */
void nbd__bytes_release(struct nbd_server *s, uint64_t n);
/* A WRITE payload started (on) or ended (off): its transmission deadline. */
void nbd__payload_deadline(struct nbd_conn *c, bool on);

/* nbd-handshake.c: an option reply (-1: the connection is closing). */
int nbd__opt_reply(struct nbd_conn *c, uint32_t opt, uint32_t reply, const void *data,
		   size_t len);

/* nbd.c, for nbd-status.c: a pooled buffer (freed with the request), the reply. */
void *nbd__buf_get(struct nbd_server *s, uint32_t len, unsigned *cls);
void nbd__req_reply(struct nbd_req *r, uint32_t err);

/* nbd-status.c: metadata contexts and NBD_CMD_BLOCK_STATUS */
int nbd__opt_meta_context(struct nbd_conn *c, uint32_t opt, const uint8_t *d, uint32_t len);
/* A context was selected for the export being served. */
bool nbd__status_allowed(const struct nbd_conn *c);
/* Ask the engine; the reply follows (r->count becomes the payload length).
 * With an I/O thread the question crosses like any request (nbd-thread.c). */
void nbd__status_submit(struct nbd_req *r);
/* The engine's half, on the engine's thread. */
void nbd__status_engine(struct nbd_req *r);
/* The structured reply header of a successful BLOCK_STATUS. */
void nbd__status_reply_hdr(struct nbd_req *r);

/* nbd-log.c: connection lines (INFO) with the peer and the export. */
void nbd__log_conn_open(struct nbd_conn *c);
void nbd__log_conn_closed(struct nbd_conn *c);

/* nbd.c: batch on the I/O side; a request back from the engine: answer it. */
void nbd__batch_begin(struct nbd_server *s);
void nbd__batch_end(struct nbd_server *s);
void nbd__req_finish(struct nbd_req *r, int result);

/* nbd-thread.c: the I/O thread (threads > 1); see nbd.h nbd_server_opts.io_thread */
int nbd__xt_create(struct nbd_server *s, uv_loop_t *engine_loop, uint32_t busy_poll_us);
void nbd__xt_destroy(struct nbd_server *s);
void nbd__xt_submit(struct nbd_req *r);                 /* I/O thread -> engine */
void nbd__xt_done(struct nbd_req *r, int result);       /* engine thread -> I/O */
/* The engine side's batch (false: not threaded, the caller batches itself). */
bool nbd__xt_batch_begin(struct nbd_server *s);
bool nbd__xt_batch_end(struct nbd_server *s);
/* Shutdown: done(arg) is to run on the engine's thread; *io_done(*io_arg) is
 * what the server calls on the I/O thread once it is drained. */
void nbd__xt_shutdown_done(struct nbd_server *s, void (*done)(void *), void *arg,
			   void (**io_done)(void *), void **io_arg);
bool nbd__xt_started(const struct nbd_server *s);

/* nbd-tls.c: the transport.  Without STARTTLS these are the plain stream. */
/* Load the credentials o names (tls != off); err says why it failed. */
int nbd__tls_create(struct nbd_server *s, const struct nbd_server_opts *o,
		    char *err, size_t errlen);
void nbd__tls_destroy(struct nbd_server *s);
enum nbd_tls_mode nbd__tls_mode(const struct nbd_server *s);
/* uv_write of plaintext; cb(wr, status) once it is on the wire. */
int nbd__conn_write(struct nbd_conn *c, uv_write_t *wr, const uv_buf_t *bufs,
		    unsigned n, uv_write_cb cb);
/* (Re)start delivering input to nbd__read_cb (plaintext). */
void nbd__conn_read_start(struct nbd_conn *c);
/* STARTTLS was acknowledged: the rest of the stream is TLS.  -errno. */
int nbd__tls_start(struct nbd_conn *c);
bool nbd__tls_active(const struct nbd_conn *c);
/* Draining: queue close_notify; true if a write was queued (wait for it). */
bool nbd__tls_bye(struct nbd_conn *c);
/* Close the transport's handles with cb; free its state (from cb). */
void nbd__tls_close(struct nbd_conn *c, uv_close_cb cb);
void nbd__tls_free(struct nbd_conn *c);

#endif
