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
 *
 * The loop is driven as tierd's main.c drives it: a completion pushed on
 * the loop thread starts an idle handle (no eventfd round trip), the drain
 * is bracketed by nbd_server_batch_begin/end (replies gathered) and followed
 * by a tick, and a timer ticks the engine when it asked to be.  The harness
 * never drains the queue or ticks behind the server's back, so a completion
 * that fails to wake the loop shows up as a hang.  The client writes with
 * plain write(2) on its non-blocking socket (libuv only reads it), and the
 * loop turns with UV_RUN_NOWAIT only while the client has bytes to send:
 * otherwise it blocks in epoll until something is ready, instead of polling.
 * (Both make an input cost a few system calls instead of a few dozen:
 * tests/fuzz/README.md has the figures.)
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "daemon/nbd.h"
#include "tier/engine.h"
#include "tier/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HANG_MS 10000u
#define HANG_TURNS 100u   /* waiting turns past HANG_MS: see pump_until */

static struct {
	bool ready;
	uv_loop_t loop;
	uv_thread_t loop_thread;
	uv_async_t cq_async;        /* completions from another thread (none here) */
	uv_idle_t cq_idle;          /* completions pushed on the loop thread */
	uv_timer_t tick_timer;      /* the engine's own schedule */
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
	uv_connect_t conn;
	const uint8_t *data;
	size_t size, sent, chunk;
	unsigned mode;
	bool connected, all_written, write_failed, shutdown_started;
	int open_handles;
	uint8_t head[8];
	size_t got;
};

/* What the client reads (only its first bytes are kept): not zeroed per input. */
static char client_in[65536];

static void schedule_tick(void);

static void on_tick(uv_timer_t *t)
{
	(void)t;
	schedule_tick();
}

/* tierd's schedule_tick: tick now, again when the engine asks. */
static void schedule_tick(void)
{
	uint64_t ms = tier_engine_tick(G.e);

	uv_timer_start(&G.tick_timer, on_tick, ms ? ms : 1, 0);
}

/* tierd's drain_cq: the replies the completions make go out gathered. */
static void drain_cq(void)
{
	nbd_server_batch_begin(G.srv);
	tier_cq_drain(G.cq);
	nbd_server_batch_end(G.srv);
	schedule_tick();
}

static void on_cq(uv_async_t *a)
{
	(void)a;
	drain_cq();
}

static void on_cq_idle(uv_idle_t *h)
{
	uv_idle_stop(h);
	drain_cq();
}

/* tierd's cq_notify: on the loop thread an idle handle, else the async. */
static void cq_notify(void *arg)
{
	uv_thread_t self = uv_thread_self();

	(void)arg;
	if (uv_thread_equal(&self, &G.loop_thread))
		uv_idle_start(&G.cq_idle, on_cq_idle);
	else
		uv_async_send(&G.cq_async);
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

/*
 * Run the loop until cond holds; abort on a hang.  cond also does the
 * client's writing and says whether it wants to write more (*busy): then
 * the loop must not block.  Otherwise UV_RUN_ONCE waits for the next event
 * or timer (the tick timer is always armed, so the deadline is checked at
 * least every 100 ms).  A hang is HANG_MS of wall time with no byte written
 * by the client *and* HANG_TURNS turns that waited: a process starved of
 * CPU (nice 19 on a loaded machine) sees the wall clock jump while its
 * timers and the server's stall timeout fire late but together, in a few
 * turns, so only a loop that really waits for an event that never comes
 * gets there.
 */
static void pump_until(bool (*cond)(void *, bool *busy), void *arg)
{
	uint64_t deadline, waits = 0;
	bool busy = false;

	uv_update_time(&G.loop);
	deadline = uv_now(&G.loop) + HANG_MS;
	while (!cond(arg, &busy)) {
		if (busy) {
			uv_run(&G.loop, UV_RUN_NOWAIT);
			uv_update_time(&G.loop);
			deadline = uv_now(&G.loop) + HANG_MS;   /* the client made progress */
			waits = 0;
			continue;
		}
		uv_run(&G.loop, UV_RUN_ONCE);
		if (uv_now(&G.loop) > deadline && ++waits >= HANG_TURNS) {
			fprintf(stderr, "fuzz_nbd: hang: %zu connection(s), %zu request(s) in flight, "
				"engine %s\n", G.srv ? nbd_server_connections(G.srv) : 0,
				G.srv ? nbd_server_in_flight(G.srv) : 0,
				tier_engine_idle(G.e) ? "idle" : "busy");
			abort();
		}
	}
}

static bool images_ready(void *arg, bool *busy)
{
	struct tier_image **imgs = arg;

	*busy = false;
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

static bool server_stopped(void *arg, bool *busy)
{
	(void)arg;
	*busy = false;
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
	G.loop_thread = uv_thread_self();
	if (uv_loop_init(&G.loop) < 0 || uv_async_init(&G.loop, &G.cq_async, on_cq) < 0 ||
	    uv_idle_init(&G.loop, &G.cq_idle) < 0 || uv_timer_init(&G.loop, &G.tick_timer) < 0 ||
	    tier_cq_create(cq_notify, NULL, &G.cq) < 0 ||
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
	schedule_tick();
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
	if (!uv_is_closing((uv_handle_t *)&cl->pipe))
		uv_close((uv_handle_t *)&cl->pipe, client_close_cb);
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	(void)h;
	(void)hint;
	*buf = uv_buf_init(client_in, sizeof(client_in));
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

/*
 * Write what the client may write this loop turn: everything (as far as the
 * socket takes it) or one chunk; the turn after the last byte, shut the
 * write side.  Returns whether the loop must not block because there is
 * more to write.  A full socket (EAGAIN: the server stopped reading for
 * backpressure) is retried after the next event: only the server's reading,
 * inside uv_run, can make room.  Any other error means the server hung up
 * first, and reading tells the rest.
 */
static bool client_write(struct client *cl)
{
	uv_os_fd_t fd;

	if (!cl->connected || cl->all_written || cl->write_failed ||
	    uv_is_closing((uv_handle_t *)&cl->pipe) ||
	    uv_fileno((uv_handle_t *)&cl->pipe, &fd) < 0)
		return false;
	if (cl->sent < cl->size) {
		size_t n = cl->size - cl->sent;
		ssize_t w;

		if (n > cl->chunk)
			n = cl->chunk;
		do
			w = write(fd, cl->data + cl->sent, n);
		while (w < 0 && errno == EINTR);
		if (w < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				cl->write_failed = true;
			return false;
		}
		cl->sent += (size_t)w;
		return true;
	}
	cl->all_written = true;
	(void)shutdown(fd, SHUT_WR);   /* fails only if the server hung up first */
	return false;
}

static void connect_cb(uv_connect_t *req, int status)
{
	struct client *cl = req->data;

	if (status < 0) {
		fprintf(stderr, "fuzz_nbd: connect: %s\n", uv_strerror(status));
		abort();
	}
	cl->connected = true;
	uv_read_start((uv_stream_t *)&cl->pipe, alloc_cb, read_cb);
}

/* Called every loop turn: writes, starts the shutdown when asked, says when all is over. */
static bool step(void *arg, bool *busy)
{
	struct client *cl = arg;

	*busy = client_write(cl);
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
	static struct client client;
	struct client *cl = &client;

	if (size < 1)
		return 0;
	if (!G.ready)
		setup();
	memset(cl, 0, sizeof(*cl));
	cl->mode = data[0];
	cl->data = size > 1 ? data + 1 : (const uint8_t *)client_in;
	cl->size = size - 1;
	cl->chunk = cl->mode & M_CHUNKED ? (size_t)1 << (cl->mode >> 4) : SIZE_MAX;
	set_faults(cl->mode);
	if (uv_pipe_init(&G.loop, &cl->pipe, 0) < 0)
		abort();
	cl->pipe.data = cl;
	cl->conn.data = cl;
	cl->open_handles = 1;
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
	return 0;
}
