/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz_nbd.c - fuzz target for the NBD server's handling of
 * client bytes (daemon/nbd.c, daemon/nbd-handshake.c): handshake, option
 * haggling, request framing, WRITE payloads, backpressure.  In process and
 * honest: a real nbd_server on a libuv loop listening on a unix socket, with
 * two exports ("fuzz" read-write, "ro" read-only) backed by a real engine
 * over mem stores.  Each input is one connection: the client writes the
 * bytes, shuts down its write side and reads until the server hangs up.
 * After each input the server must have closed the connection, released
 * every request and left the engine idle; a connection that outlives a
 * deadline is reported as a hang.  Small per-connection caps make the
 * backpressure path reachable.  It never touches the disk beyond its socket.
 */
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
	char sock[108];
} G;

struct client {
	uv_pipe_t pipe;
	uv_connect_t conn;
	uv_write_t wr;
	uv_shutdown_t sd;
	uv_buf_t out;
	char in[65536];
	uint8_t head[8];
	size_t got;
	bool closed;
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

static void cleanup(void)
{
	if (G.sock[0])
		unlink(G.sock);
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
	if (tier_image_open(G.e, &o, out) < 0)
		return -1;
	return nbd_server_add_export(G.srv, *out, ro) < 0 ? -1 : 0;
}

static void setup(void)
{
	struct tier_engine_opts eo = {0};
	struct nbd_server_opts so = {0};
	struct tier_mem_opts mo = {0};
	struct tier_image *imgs[2];

	signal(SIGPIPE, SIG_IGN);
	if (uv_loop_init(&G.loop) < 0 || uv_async_init(&G.loop, &G.cq_async, on_cq) < 0 ||
	    tier_cq_create(cq_notify, &G.cq_async, &G.cq) < 0 ||
	    tier_store_mem_create("base", &mo, G.cq, &G.base) < 0 ||
	    tier_store_mem_create("cache", &mo, G.cq, &G.cache) < 0)
		abort();
	eo.base = G.base;
	eo.cache = G.cache;
	tier_params_default(&eo.params);
	eo.params.object_size = 64 * 1024;
	eo.params.extent_size = 4096;
	eo.params.target_max_bytes = 4 * 64 * 1024;   /* tiny cache: the agent works */
	eo.params.min_read_recency_for_promote = 0;
	eo.params.min_write_recency_for_promote = 0;
	if (tier_engine_create(&eo, &G.e) < 0)
		abort();
	so.loop = &G.loop;
	so.max_requests_per_conn = 4;        /* backpressure after a few requests */
	so.max_bytes_per_conn = 256 * 1024;
	if (nbd_server_create(&so, &G.srv) < 0)
		abort();
	if (open_image("fuzz", 1024 * 1024, false, &imgs[0]) < 0 ||
	    open_image("ro", 256 * 1024 + 512, true, &imgs[1]) < 0)
		abort();
	pump_until(images_ready, imgs);
	snprintf(G.sock, sizeof(G.sock), "unix:/tmp/tierd-fuzz-nbd-%d.sock", (int)getpid());
	if (nbd_server_listen(G.srv, G.sock) < 0)
		abort();
	memmove(G.sock, G.sock + 5, strlen(G.sock + 5) + 1);   /* drop "unix:" */
	atexit(cleanup);
	G.ready = true;
}

static void client_close_cb(uv_handle_t *h)
{
	((struct client *)h->data)->closed = true;
}

static void client_close(struct client *cl)
{
	if (!uv_is_closing((uv_handle_t *)&cl->pipe))
		uv_close((uv_handle_t *)&cl->pipe, client_close_cb);
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

static void write_cb(uv_write_t *wr, int status)
{
	struct client *cl = wr->data;

	if (status < 0)
		return;   /* the server closed early; read_cb sees the end */
	cl->sd.data = cl;
	if (uv_shutdown(&cl->sd, (uv_stream_t *)&cl->pipe, shutdown_cb) < 0)
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
	cl->wr.data = cl;
	if (uv_write(&cl->wr, (uv_stream_t *)&cl->pipe, &cl->out, 1, write_cb) < 0)
		client_close(cl);
}

static bool all_done(void *arg)
{
	struct client *cl = arg;

	return cl->closed && nbd_server_connections(G.srv) == 0 &&
	       nbd_server_in_flight(G.srv) == 0 && tier_engine_idle(G.e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t greeting[8] = {'N', 'B', 'D', 'M', 'A', 'G', 'I', 'C'};
	struct client *cl;

	if (!G.ready)
		setup();
	cl = calloc(1, sizeof(*cl));
	if (!cl)
		return 0;
	/* uv_write needs a non-NULL base even for an empty input */
	cl->out = uv_buf_init(size ? (char *)data : cl->in, (unsigned)size);
	if (uv_pipe_init(&G.loop, &cl->pipe, 0) < 0)
		abort();
	cl->pipe.data = cl;
	cl->conn.data = cl;
	uv_pipe_connect(&cl->conn, &cl->pipe, G.sock, connect_cb);
	pump_until(all_done, cl);
	/* whatever the input, the server spoke first and spoke NBD */
	if (cl->got != sizeof(greeting) || memcmp(cl->head, greeting, sizeof(greeting)) != 0)
		abort();
	free(cl);
	return 0;
}
