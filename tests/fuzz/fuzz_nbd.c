/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz_nbd.c - fuzz target for the NBD server's handling of
 * client bytes (daemon/nbd.c, daemon/nbd-handshake.c): handshake, option
 * haggling, request framing, WRITE payloads, backpressure, shutdown.  In
 * process and honest: a real nbd_server on a libuv loop listening on a unix
 * socket, with two exports ("fuzz" read-write, "ro" read-only) backed by a
 * real engine over mem stores.  Each input is one connection.  Byte 0 is
 * the harness mode, the rest is what the client sends:
 *   bit 0    deliver in chunks of 2^(bits 4-7) bytes, one loop turn apart
 *            (the server must cope with any segmentation)
 *   bit 1    shut the server down once it has accepted and the client has
 *            written everything (SIGTERM's drain), then build a new one
 *   bit 2    the stores fail 10% of ops with EIO during this input
 *   bit 3    ... 50% of ops
 * The client writes, shuts down its write side and reads until the server
 * hangs up.  Afterwards the server must have closed the connection,
 * released every request and left the engine idle; anything still open
 * after 10 s is reported as a hang.  Small per-connection caps make the
 * backpressure path reachable.  The engine and its mem stores live across
 * inputs (as in tierd), so a crash may depend on earlier inputs; the mode
 * and the stream are all that steer one input.  It never touches the disk
 * beyond its socket.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "daemon/nbd.h"
#include "tier/engine.h"
#include "tier/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HANG_NS (10ull * 1000 * 1000 * 1000)

static struct {
	bool ready;
	uv_loop_t loop;
	uv_async_t cq_async;
	struct tier_cq *cq;
	struct tier_store *base, *cache;
	struct tier_engine *e;
	struct nbd_server *srv;
	struct tier_image *imgs[2];
	char sock[108];
	char psk[108];              /* tls_psk_file of the server (tls = on) */
	bool srv_done;
} G;

enum {
	M_CHUNKED = 1u << 0,
	M_SHUTDOWN = 1u << 1,
	M_FAULT10 = 1u << 2,
	M_FAULT50 = 1u << 3,
};

struct client {
	uv_pipe_t pipe;
	uv_timer_t timer;
	uv_connect_t conn;
	uv_write_t wr;
	uv_shutdown_t sd;
	const uint8_t *data;
	size_t size, sent, chunk;
	unsigned mode;
	bool all_written, shutdown_started;
	int open_handles;
	char in[65536];
	uint8_t head[8];
	size_t got;
};

static void cq_notify(void *arg)
{
	uv_async_send(arg);
}

static void on_cq(uv_async_t *a)
{
	(void)a;
	tier_cq_drain(G.cq);
}

/* Formats every message the server logs, then drops it. */
static void log_cb(void *arg, enum tier_log_level lvl, const char *msg)
{
	(void)arg;
	(void)lvl;
	if (strlen(msg) >= 512)
		abort();
}

static void cleanup(void)
{
	if (G.sock[0])
		unlink(G.sock);
	if (G.psk[0])
		unlink(G.psk);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Run the loop (and the engine) until cond holds; abort on a hang. */
static void pump_until(bool (*cond)(void *), void *arg)
{
	uint64_t deadline = now_ns() + HANG_NS;

	while (!cond(arg)) {
		uv_run(&G.loop, UV_RUN_NOWAIT);
		tier_cq_drain(G.cq);
		tier_engine_tick(G.e);
		if (now_ns() > deadline) {
			fprintf(stderr, "fuzz_nbd: hang: %zu connection(s), %zu request(s) in flight, "
				"engine %s\n", nbd_server_connections(G.srv),
				nbd_server_in_flight(G.srv), tier_engine_idle(G.e) ? "idle" : "busy");
			abort();
		}
	}
}

static bool images_ready(void *arg)
{
	struct tier_image **imgs = arg;

	return tier_image_ready(imgs[0]) != 0 && tier_image_ready(imgs[1]) != 0;
}

static int open_image(const char *name, uint64_t size, bool ro, struct tier_image **out)
{
	char prefix[64];
	struct tier_image_opts o = {.name = name, .size = size, .read_only = ro};

	snprintf(prefix, sizeof(prefix), "rbd_data.%s", name);
	o.object_prefix = prefix;
	return tier_image_open(G.e, &o, out) < 0 ? -1 : 0;
}

static void server_start(void)
{
	struct nbd_server_opts so = {0};
	char addr[128];

	so.loop = &G.loop;
	so.max_requests_per_conn = 4;        /* backpressure after a few requests */
	so.max_bytes_per_conn = 256 * 1024;
	so.log = log_cb;
	/* tls = on with a PSK: STARTTLS is acknowledged and whatever follows
	 * goes through GnuTLS's handshake (garbage, truncated hellos) */
	so.tls = NBD_TLS_ON;
	so.tls_psk_file = G.psk;
	if (nbd_server_create(&so, &G.srv) < 0 ||
	    nbd_server_add_export(G.srv, G.imgs[0], false) < 0 ||
	    nbd_server_add_export(G.srv, G.imgs[1], true) < 0)
		abort();
	snprintf(addr, sizeof(addr), "unix:%s", G.sock);
	if (nbd_server_listen(G.srv, addr) < 0)
		abort();
}

static void server_done(void *arg)
{
	(void)arg;
	G.srv_done = true;
}

static bool server_stopped(void *arg)
{
	(void)arg;
	return G.srv_done && tier_engine_idle(G.e);
}

/* After a shutdown: let the close callbacks finish, free, start afresh. */
static void server_restart(void)
{
	pump_until(server_stopped, NULL);
	uv_run(&G.loop, UV_RUN_NOWAIT);
	if (nbd_server_connections(G.srv) || nbd_server_in_flight(G.srv))
		abort();
	nbd_server_destroy(G.srv);
	G.srv = NULL;
	G.srv_done = false;
	server_start();
}

static void setup(void)
{
	struct tier_engine_opts eo = {0};
	struct tier_mem_opts mo = {0};

	signal(SIGPIPE, SIG_IGN);
	if (uv_loop_init(&G.loop) < 0 || uv_async_init(&G.loop, &G.cq_async, on_cq) < 0 ||
	    tier_cq_create(cq_notify, &G.cq_async, &G.cq) < 0 ||
	    tier_store_mem_create("base", &mo, G.cq, &G.base) < 0 ||
	    tier_store_mem_create("cache", &mo, G.cq, &G.cache) < 0)
		abort();
	eo.base = G.base;
	eo.cache = G.cache;
	eo.log = log_cb;
	tier_params_default(&eo.params);
	eo.params.object_size = 64 * 1024;
	eo.params.extent_size = 4096;
	eo.params.target_max_bytes = 4 * 64 * 1024;   /* tiny cache: the agent works */
	eo.params.min_read_recency_for_promote = 0;
	eo.params.min_write_recency_for_promote = 0;
	if (tier_engine_create(&eo, &G.e) < 0)
		abort();
	if (open_image("fuzz", 1024 * 1024, false, &G.imgs[0]) < 0 ||
	    open_image("ro", 256 * 1024 + 512, true, &G.imgs[1]) < 0)
		abort();
	pump_until(images_ready, G.imgs);
	snprintf(G.sock, sizeof(G.sock), "/tmp/tierd-fuzz-nbd-%d.sock", (int)getpid());
	snprintf(G.psk, sizeof(G.psk), "/tmp/tierd-fuzz-nbd-%d.psk", (int)getpid());
	atexit(cleanup);
	{
		FILE *f = fopen(G.psk, "w");

		if (!f || fputs("fuzz:000102030405060708090a0b0c0d0e0f\n", f) < 0 || fclose(f))
			abort();
	}
	server_start();
	G.ready = true;
}

static void set_faults(unsigned mode)
{
	struct tier_store_fault f = {0};

	if (!(mode & (M_FAULT10 | M_FAULT50))) {
		tier_store_set_fault(G.base, NULL);
		tier_store_set_fault(G.cache, NULL);
		return;
	}
	f.fail_fraction = mode & M_FAULT50 ? 0.5 : 0.1;
	f.err = EIO;
	f.seed = mode + 1;
	tier_store_set_fault(G.base, &f);
	f.seed = mode + 2;
	tier_store_set_fault(G.cache, &f);
}

static void client_close_cb(uv_handle_t *h)
{
	((struct client *)h->data)->open_handles--;
}

static void client_close(struct client *cl)
{
	if (!uv_is_closing((uv_handle_t *)&cl->pipe)) {
		uv_close((uv_handle_t *)&cl->pipe, client_close_cb);
		uv_close((uv_handle_t *)&cl->timer, client_close_cb);
	}
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct client *cl = h->data;

	(void)hint;
	*buf = uv_buf_init(cl->in, sizeof(cl->in));
}

static void read_cb(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct client *cl = st->data;

	if (n < 0) {
		client_close(cl);
		return;
	}
	for (ssize_t i = 0; i < n && cl->got < sizeof(cl->head); i++)
		cl->head[cl->got++] = (uint8_t)buf->base[i];
}

static void shutdown_cb(uv_shutdown_t *sd, int status)
{
	(void)sd;
	(void)status;   /* the server may have hung up first: reading tells */
}

static void send_next(struct client *cl);

static void timer_cb(uv_timer_t *t)
{
	send_next(t->data);
}

static void write_cb(uv_write_t *wr, int status)
{
	struct client *cl = wr->data;

	if (status < 0 || uv_is_closing((uv_handle_t *)&cl->pipe))
		return;   /* the server closed early; read_cb sees the end */
	if (cl->mode & M_CHUNKED)
		uv_timer_start(&cl->timer, timer_cb, 0, 0);
	else
		send_next(cl);
}

/* Write the next chunk, or shut down the write side after the last one. */
static void send_next(struct client *cl)
{
	size_t n = cl->size - cl->sent;
	uv_buf_t b;

	if (uv_is_closing((uv_handle_t *)&cl->pipe))
		return;
	if (n == 0) {
		cl->all_written = true;
		cl->sd.data = cl;
		if (uv_shutdown(&cl->sd, (uv_stream_t *)&cl->pipe, shutdown_cb) < 0)
			client_close(cl);
		return;
	}
	if (n > cl->chunk)
		n = cl->chunk;
	b = uv_buf_init((char *)cl->data + cl->sent, (unsigned)n);
	cl->sent += n;
	cl->wr.data = cl;
	if (uv_write(&cl->wr, (uv_stream_t *)&cl->pipe, &b, 1, write_cb) < 0)
		client_close(cl);
}

static void connect_cb(uv_connect_t *req, int status)
{
	struct client *cl = req->data;

	if (status < 0) {
		fprintf(stderr, "fuzz_nbd: connect: %s\n", uv_strerror(status));
		abort();
	}
	uv_read_start((uv_stream_t *)&cl->pipe, alloc_cb, read_cb);
	send_next(cl);
}

/* Called every loop turn: starts the shutdown when asked, says when all is over. */
static bool step(void *arg)
{
	struct client *cl = arg;

	if ((cl->mode & M_SHUTDOWN) && !cl->shutdown_started && cl->all_written &&
	    nbd_server_connections(G.srv) > 0) {
		cl->shutdown_started = true;
		nbd_server_shutdown(G.srv, server_done, NULL);
	}
	return cl->open_handles == 0 && nbd_server_connections(G.srv) == 0 &&
	       nbd_server_in_flight(G.srv) == 0 && tier_engine_idle(G.e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t greeting[8] = {'N', 'B', 'D', 'M', 'A', 'G', 'I', 'C'};
	struct client *cl;

	if (size < 1)
		return 0;
	if (!G.ready)
		setup();
	cl = calloc(1, sizeof(*cl));
	if (!cl)
		return 0;
	cl->mode = data[0];
	cl->data = size > 1 ? data + 1 : (const uint8_t *)cl->in;
	cl->size = size - 1;
	cl->chunk = cl->mode & M_CHUNKED ? (size_t)1 << (cl->mode >> 4) : SIZE_MAX;
	set_faults(cl->mode);
	if (uv_pipe_init(&G.loop, &cl->pipe, 0) < 0 || uv_timer_init(&G.loop, &cl->timer) < 0)
		abort();
	cl->pipe.data = cl;
	cl->timer.data = cl;
	cl->conn.data = cl;
	cl->open_handles = 2;
	uv_pipe_connect(&cl->conn, &cl->pipe, G.sock, connect_cb);
	pump_until(step, cl);
	if (cl->mode & M_SHUTDOWN) {
		/* the client may have hung up before its turn: shut down idle then */
		if (!cl->shutdown_started)
			nbd_server_shutdown(G.srv, server_done, NULL);
		server_restart();
	}
	set_faults(0);
	/*
	 * Whatever the input, the server spoke first and spoke NBD (a shutdown
	 * may cut the greeting short, never change it).
	 */
	if (cl->got > sizeof(greeting) || memcmp(cl->head, greeting, cl->got) != 0 ||
	    (!(cl->mode & M_SHUTDOWN) && cl->got != sizeof(greeting)))
		abort();
	free(cl);
	return 0;
}
