/* SPDX-License-Identifier: MIT */
/*
 * daemon/nbd.c - the NBD server: listeners, connections, the fixed newstyle
 * handshake and the transmission phase over libuv.  It decides how each byte
 * a client sends is framed, which requests are valid (range, size, flags,
 * read-only) and when to stop reading a socket (per-connection backpressure);
 * valid requests go to the engine and are answered in completion order.  It
 * must never crash, stall other connections or leak because of one client's
 * input: framing errors close only that connection, request errors get NBD
 * error replies, and the steady-state data path allocates nothing (requests
 * and buffers come from free lists).
 */
#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/nbd.h"
#include "daemon/nbd-internal.h"
#include "daemon/nbd-protocol.h"

void nbd__log(struct nbd_server *s, enum tier_log_level lvl, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!s->log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	s->log(s->log_arg, lvl, msg);
}

/* ---- pools: requests and payload buffers, no malloc in steady state ---- */

static unsigned buf_class(uint32_t len)
{
	unsigned k = 0;

	while ((NBD_BUF_MIN << k) < len)
		k++;
	return k;
}

static void *buf_get(struct nbd_server *s, uint32_t len, unsigned *cls)
{
	unsigned k = buf_class(len);
	struct nbd_freebuf *fb = s->free_bufs[k];
	void *p = NULL;

	*cls = k;
	if (fb) {
		s->free_bufs[k] = fb->next;
		s->pool_bytes -= (size_t)NBD_BUF_MIN << k;
		return fb;
	}
	if (posix_memalign(&p, 4096, (size_t)NBD_BUF_MIN << k))
		return NULL;
	return p;
}

void *nbd__buf_get(struct nbd_server *s, uint32_t len, unsigned *cls)
{
	return buf_get(s, len, cls);
}

static void buf_put(struct nbd_server *s, void *p, unsigned k)
{
	struct nbd_freebuf *fb = p;
	size_t sz = (size_t)NBD_BUF_MIN << k;

	if (!p)
		return;
	if (s->pool_bytes + sz > NBD_POOL_MAX_BYTES) {
		free(p);
		return;
	}
	fb->next = s->free_bufs[k];
	s->free_bufs[k] = fb;
	s->pool_bytes += sz;
}

static struct nbd_req *req_get(struct nbd_conn *c)
{
	struct nbd_server *s = c->s;
	struct nbd_req *r = s->free_reqs;

	if (r)
		s->free_reqs = r->next_free;
	else if (!(r = malloc(sizeof(*r))))
		return NULL;
	memset(r, 0, offsetof(struct nbd_req, wr));
	r->c = c;
	c->in_flight++;
	s->in_flight++;
	return r;
}

/* The request is answered (or dropped): give everything back. */
static void req_release(struct nbd_req *r)
{
	struct nbd_conn *c = r->c;
	struct nbd_server *s = c->s;

	buf_put(s, r->buf, r->buf_class);
	r->buf = NULL;
	c->in_flight--;
	c->in_bytes -= r->charge;
	s->in_flight--;
	r->next_free = s->free_reqs;
	s->free_reqs = r;
	nbd__bytes_release(s, r->charge);
	if (c->closing || c->draining)
		nbd__conn_maybe_finish(c);
	else if (c->paused)
		nbd__conn_resume(c);
}

/* ---- errors ---- */

static uint32_t errno_to_nbd(int err)
{
	switch (err < 0 ? -err : err) {
	case 0: return NBD_SUCCESS;
	case EPERM: case EROFS: return NBD_EPERM;
	case ENOMEM: return NBD_ENOMEM;
	case EINVAL: return NBD_EINVAL;
	case ENOSPC: case EDQUOT: return NBD_ENOSPC;
	case EOVERFLOW: return NBD_EOVERFLOW;
	case ENOTSUP: return NBD_ENOTSUP;
	case ESHUTDOWN: return NBD_ESHUTDOWN;
	default: return NBD_EIO;
	}
}

/* ---- replies ---- */

static void req_write_cb(uv_write_t *wr, int status)
{
	struct nbd_req *r = wr->data;
	struct nbd_conn *c = r->c;

	c->writes_pending--;
	if (status < 0 && status != UV_ECANCELED && !c->closing)
		nbd__conn_close(c, "reply write failed");
	req_release(r);
}

/* Requests chained by out_next, one write: release them all. */
static void batch_write_cb(uv_write_t *wr, int status)
{
	struct nbd_req *r = wr->data, *next;
	struct nbd_conn *c = r->c;

	c->writes_pending--;
	if (status < 0 && status != UV_ECANCELED && !c->closing)
		nbd__conn_close(c, "reply write failed");
	for (; r; r = next) {
		next = r->out_next;
		req_release(r);
	}
}

static void reply_bufs(struct nbd_req *r, uv_buf_t *bufs, unsigned *n)
{
	bufs[(*n)++] = uv_buf_init((char *)&r->hdr, r->hdr_len);
	if (r->send_data)
		bufs[(*n)++] = uv_buf_init(r->buf, r->count);
}

/*
 * Write bufs to c's plain socket at once when nothing is queued before them
 * (uv_try_write): no uv_write_t in libuv's queues, so no write callback one
 * loop iteration later and no epoll_ctl (libuv re-arms the watcher after
 * every completed uv_write: one syscall per reply at QD 1).  What the
 * socket does not take goes through uv_write as before.  *sent says every
 * byte is in the socket and cb will not run; TLS always goes through
 * nbd__conn_write.
 */
static int conn_send(struct nbd_conn *c, uv_write_t *wr, const uv_buf_t *bufs, unsigned n,
		     uv_write_cb cb, bool *sent)
{
	uv_buf_t rest[2 * NBD_GATHER_MAX];
	size_t done;
	unsigned i, k;
	int rc;

	*sent = false;
	if (c->tls || n > 2 * NBD_GATHER_MAX)
		return nbd__conn_write(c, wr, bufs, n, cb);
	rc = uv_try_write(&c->h.stream, bufs, n);
	if (rc == UV_EAGAIN)
		return nbd__conn_write(c, wr, bufs, n, cb);
	if (rc < 0)
		return rc;
	done = (size_t)rc;
	for (i = 0; i < n && done >= bufs[i].len; i++)
		done -= bufs[i].len;
	if (i == n) {
		*sent = true;
		return 0;
	}
	for (k = 0; i < n; i++, k++)
		rest[k] = bufs[i];
	rest[0].base += done;
	rest[0].len -= done;
	return nbd__conn_write(c, wr, rest, k, cb);
}

/* Send c's queued replies, NBD_GATHER_MAX to a write. */
static void conn_flush(struct nbd_conn *c)
{
	while (c->out_head) {
		struct nbd_req *first = c->out_head, *last = NULL, *r = first;
		uv_buf_t bufs[2 * NBD_GATHER_MAX];
		unsigned n = 0, k = 0;
		bool sent;
		int rc;

		for (; r && k < NBD_GATHER_MAX; r = r->out_next, k++) {
			reply_bufs(r, bufs, &n);
			last = r;
		}
		c->out_head = r;
		if (!r)
			c->out_tail = NULL;
		last->out_next = NULL;
		first->wr.data = first;
		rc = conn_send(c, &first->wr, bufs, n, batch_write_cb, &sent);
		if (rc < 0) {
			nbd__conn_close(c, uv_strerror(rc));   /* drops the rest of the queue */
			for (r = first; r; r = last) {
				last = r->out_next;
				req_release(r);
			}
			return;
		}
		if (!sent) {
			c->writes_pending++;
			continue;
		}
		for (r = first; r; r = last) {
			last = r->out_next;
			req_release(r);
		}
	}
}

/* A closing connection sends nothing more: give the queued replies back. */
static void conn_drop_queued(struct nbd_conn *c)
{
	struct nbd_req *r = c->out_head, *next;

	c->out_head = c->out_tail = NULL;
	for (; r; r = next) {
		next = r->out_next;
		req_release(r);
	}
}

void nbd__batch_begin(struct nbd_server *s)
{
	s->batch_depth++;
}

/* The daemon's drain: with an I/O thread, it batches the hand-back instead. */
void nbd_server_batch_begin(struct nbd_server *s)
{
	if (s && !nbd__xt_batch_begin(s))
		nbd__batch_begin(s);
}

void nbd_server_batch_end(struct nbd_server *s)
{
	if (s && !nbd__xt_batch_end(s))
		nbd__batch_end(s);
}

void nbd__batch_end(struct nbd_server *s)
{
	struct nbd_conn *c;

	if (--s->batch_depth)
		return;
	while ((c = s->out_conns)) {
		s->out_conns = c->out_next;
		c->out_next = NULL;
		c->out_listed = false;
		conn_flush(c);
	}
}

static void req_reply(struct nbd_req *r, uint32_t err)
{
	struct nbd_conn *c = r->c;
	struct nbd_server *s = c->s;
	uv_buf_t bufs[2];
	unsigned n = 0;
	bool sent;
	int rc;

	if (c->closing) {
		req_release(r);
		return;
	}
	if (c->structured && r->cmd == NBD_CMD_BLOCK_STATUS && !err) {
		nbd__status_reply_hdr(r);    /* nbd-status.c */
	} else if (c->structured && r->cmd == NBD_CMD_READ) {
		struct nbd_structured_reply *h = &r->hdr.sr.h;

		h->magic = htobe32(NBD_STRUCTURED_REPLY_MAGIC);
		h->flags = htobe16(NBD_REPLY_FLAG_DONE);
		h->cookie = r->cookie;
		if (err) {
			h->type = htobe16(NBD_REPLY_TYPE_ERROR);
			h->length = htobe32(sizeof(r->hdr.sr.u.err));
			r->hdr.sr.u.err.error = htobe32(err);
			r->hdr.sr.u.err.len = 0;
			r->hdr_len = sizeof(*h) + sizeof(r->hdr.sr.u.err);
		} else {
			h->type = htobe16(NBD_REPLY_TYPE_OFFSET_DATA);
			h->length = htobe32(sizeof(r->hdr.sr.u.od) + r->count);
			r->hdr.sr.u.od.offset = htobe64(r->offset);
			r->hdr_len = sizeof(*h) + sizeof(r->hdr.sr.u.od);
			r->send_data = true;
		}
	} else {
		r->hdr.simple.magic = htobe32(NBD_SIMPLE_REPLY_MAGIC);
		r->hdr.simple.error = htobe32(err);
		r->hdr.simple.cookie = r->cookie;
		r->hdr_len = sizeof(r->hdr.simple);
		r->send_data = !err && r->cmd == NBD_CMD_READ;
	}
	if (s->batch_depth) {
		r->out_next = NULL;
		if (c->out_tail)
			c->out_tail->out_next = r;
		else
			c->out_head = r;
		c->out_tail = r;
		if (!c->out_listed) {
			c->out_listed = true;
			c->out_next = s->out_conns;
			s->out_conns = c;
		}
		return;
	}
	reply_bufs(r, bufs, &n);
	r->wr.data = r;
	rc = conn_send(c, &r->wr, bufs, n, req_write_cb, &sent);
	if (rc < 0) {
		nbd__conn_close(c, uv_strerror(rc));
		req_release(r);
		return;
	}
	if (sent)
		req_release(r);
	else
		c->writes_pending++;
}

void nbd__req_reply(struct nbd_req *r, uint32_t err)
{
	req_reply(r, err);
}

void nbd__req_finish(struct nbd_req *r, int result)
{
	r->c->engine_pending--;
	req_reply(r, errno_to_nbd(result));
}

/* On the engine's thread: with an I/O thread, the answer is made there. */
static void req_done(struct tier_request *t, int result)
{
	struct nbd_req *r = t->priv;

	if (r->c->s->xt)
		nbd__xt_done(r, result);
	else
		nbd__req_finish(r, result);
}

static void req_submit(struct nbd_req *r)
{
	struct nbd_conn *c = r->c;
	struct tier_request *t = &r->t;
	int rc;

	memset(t, 0, sizeof(*t));
	switch (r->cmd) {
	case NBD_CMD_READ:         t->type = TIER_REQ_READ; break;
	case NBD_CMD_WRITE:        t->type = TIER_REQ_WRITE; break;
	case NBD_CMD_TRIM:         t->type = TIER_REQ_TRIM; break;
	case NBD_CMD_WRITE_ZEROES: t->type = TIER_REQ_WRITE_ZEROES; break;
	case NBD_CMD_CACHE:        t->type = TIER_REQ_CACHE; break;
	default:                   t->type = TIER_REQ_FLUSH; break;
	}
	if (r->flags & NBD_CMD_FLAG_FUA)
		t->flags |= TIER_REQ_F_FUA;
	if (r->flags & NBD_CMD_FLAG_FAST_ZERO)
		t->flags |= TIER_REQ_F_FAST_ZERO;
	if (t->type != TIER_REQ_FLUSH) {
		t->off = r->offset;
		t->len = r->count;
	}
	t->buf = r->buf;
	t->cb = req_done;
	t->priv = r;
	r->gen = c->exp->gen;
	c->engine_pending++;
	if (c->s->xt) {
		nbd__xt_submit(r);   /* submitted on the engine's thread */
		return;
	}
	rc = tier_image_submit(c->exp->img, t);
	if (rc < 0)
		nbd__req_finish(r, rc);
}

/* ---- request validation ---- */

#define NBD_CMD_FLAGS_KNOWN (NBD_CMD_FLAG_FUA | NBD_CMD_FLAG_NO_HOLE | NBD_CMD_FLAG_REQ_ONE | \
			     NBD_CMD_FLAG_FAST_ZERO)

static bool cmd_writes(uint16_t cmd)
{
	return cmd == NBD_CMD_WRITE || cmd == NBD_CMD_TRIM || cmd == NBD_CMD_WRITE_ZEROES;
}

/* The NBD error a request deserves before it reaches the engine, or 0. */
static uint32_t req_check(const struct nbd_conn *c, const struct nbd_req *r)
{
	const struct nbd_export *x = c->exp;

	switch (r->cmd) {
	case NBD_CMD_READ: case NBD_CMD_WRITE: case NBD_CMD_TRIM:
	case NBD_CMD_WRITE_ZEROES: case NBD_CMD_CACHE: case NBD_CMD_FLUSH:
		break;
	case NBD_CMD_BLOCK_STATUS:   /* only with base:allocation selected (nbd-status.c) */
		if (!nbd__status_allowed(c))
			return NBD_EINVAL;
		break;
	default:
		return NBD_EINVAL;
	}
	if (r->flags & ~NBD_CMD_FLAGS_KNOWN)
		return NBD_EINVAL;
	if ((r->flags & NBD_CMD_FLAG_FAST_ZERO) && r->cmd != NBD_CMD_WRITE_ZEROES)
		return NBD_EINVAL;
	if (x->read_only && cmd_writes(r->cmd))
		return NBD_EPERM;
	if (r->cmd == NBD_CMD_FLUSH)
		return 0;
	if ((r->cmd == NBD_CMD_READ || r->cmd == NBD_CMD_WRITE) && r->count > NBD_MAX_BLOCK_SIZE)
		return NBD_EOVERFLOW;
	if (r->count == 0)
		return NBD_EINVAL;
	if (r->offset > x->size || r->count > x->size - r->offset)
		return (r->cmd == NBD_CMD_WRITE || r->cmd == NBD_CMD_WRITE_ZEROES) ?
			NBD_ENOSPC : NBD_EINVAL;
	return 0;
}

static bool conn_over_caps(const struct nbd_conn *c)
{
	const struct nbd_server *s = c->s;

	/* handshake: a client sending options without reading the replies */
	if (!c->exp)
		return c->writes_pending >= NBD_HS_MAX_WRITES;
	return c->in_flight >= s->max_requests || c->in_bytes >= s->max_bytes ||
	       nbd__global_over(s);
}

/*
 * One request header.  Returns 0 to go on parsing, or -1 when the
 * connection is closing.
 */
static int conn_request(struct nbd_conn *c, const struct nbd_request *h)
{
	struct nbd_req *r;
	uint32_t err;

	if (be32toh(h->magic) != NBD_REQUEST_MAGIC) {
		nbd__conn_close(c, "bad request magic");
		return -1;
	}
	r = req_get(c);
	if (!r) {
		nbd__conn_close(c, "out of memory");
		return -1;
	}
	r->cookie = h->cookie;            /* echoed verbatim, no byte swap */
	r->flags = be16toh(h->flags);
	r->cmd = be16toh(h->type);
	r->offset = be64toh(h->offset);
	r->count = be32toh(h->count);

	if (r->cmd == NBD_CMD_DISC) {
		req_release(r);
		nbd__conn_drain(c);
		return -1;
	}
	err = req_check(c, r);
	if (r->cmd == NBD_CMD_WRITE) {
		if (err) {
			/* refused, but its payload is still on the wire */
			r->err = err;
			c->discard_left = r->count;
			c->cur = r;
			c->state = NBD_CS_REQ_DISCARD;
			nbd__payload_deadline(c, true);
			return 0;
		}
		r->buf = buf_get(c->s, r->count, &r->buf_class);
		if (!r->buf) {
			r->err = NBD_ENOMEM;
			c->discard_left = r->count;
			c->cur = r;
			c->state = NBD_CS_REQ_DISCARD;
			nbd__payload_deadline(c, true);
			return 0;
		}
		r->charge = r->count;
		c->in_bytes += r->charge;
		c->s->bytes_in_flight += r->charge;
		c->cur = r;
		c->payload_got = 0;
		c->state = NBD_CS_REQ_PAYLOAD;
		nbd__payload_deadline(c, true);
		return 0;
	}
	if (err) {
		req_reply(r, err);
		return c->closing ? -1 : 0;
	}
	if (r->cmd == NBD_CMD_READ) {
		r->buf = buf_get(c->s, r->count, &r->buf_class);
		if (!r->buf) {
			req_reply(r, NBD_ENOMEM);
			return c->closing ? -1 : 0;
		}
		r->charge = r->count;
		c->in_bytes += r->charge;
		c->s->bytes_in_flight += r->charge;
	}
	if (r->cmd == NBD_CMD_BLOCK_STATUS)
		nbd__status_submit(r);
	else
		req_submit(r);
	return c->closing ? -1 : 0;
}

/* Payload of the current WRITE complete (or discarded): act on it. */
static void conn_payload_done(struct nbd_conn *c)
{
	struct nbd_req *r = c->cur;

	c->cur = NULL;
	c->state = NBD_CS_REQ_HDR;
	nbd__payload_deadline(c, false);
	if (c->draining || c->closing) {
		req_release(r);
		return;
	}
	if (r->err)
		req_reply(r, r->err);
	else
		req_submit(r);
}

/*
 * Consume buffered input as far as the state machine and the backpressure
 * caps allow.
 */
void nbd__conn_process(struct nbd_conn *c)
{
	if (c->in_process)
		return;
	c->in_process = true;
	while (!c->closing && !c->draining) {
		size_t avail = c->rlen - c->rpos;
		uint8_t *p = c->rbuf + c->rpos;

		if (c->state == NBD_CS_REQ_HDR) {
			if (conn_over_caps(c)) {
				if (!c->paused) {
					c->paused = true;
					uv_read_stop(&c->h.stream);
				}
				break;
			}
			if (avail < sizeof(struct nbd_request))
				break;
			c->rpos += sizeof(struct nbd_request);
			if (conn_request(c, (const struct nbd_request *)p) < 0)
				break;
		} else if (c->state == NBD_CS_REQ_PAYLOAD) {
			uint32_t want = c->cur->count - c->payload_got;
			uint32_t n = avail < want ? (uint32_t)avail : want;

			if (n == 0)
				break;
			memcpy((uint8_t *)c->cur->buf + c->payload_got, p, n);
			c->rpos += n;
			c->payload_got += n;
			if (c->payload_got == c->cur->count)
				conn_payload_done(c);
		} else if (c->state == NBD_CS_REQ_DISCARD) {
			uint64_t n = avail < c->discard_left ? avail : c->discard_left;

			c->rpos += n;
			c->discard_left -= n;
			if (c->discard_left)
				break;
			conn_payload_done(c);
		} else {
			int rc;

			if (conn_over_caps(c)) {
				if (!c->paused) {
					c->paused = true;
					uv_read_stop(&c->h.stream);
				}
				break;
			}
			rc = nbd__handshake_step(c);
			if (rc <= 0)
				break;
		}
	}
	c->in_process = false;
}

void nbd__conn_resume(struct nbd_conn *c)
{
	if (conn_over_caps(c))
		return;
	c->paused = false;
	nbd__conn_process(c);
	if (!c->paused && !c->closing && !c->draining)
		nbd__conn_read_start(c);
}

/* ---- socket input ---- */

void nbd__alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct nbd_conn *c = h->data;

	(void)hint;
	if (c->rpos == c->rlen)
		c->rpos = c->rlen = 0;
	/* a WRITE payload with nothing buffered: read straight into its buffer */
	if (c->state == NBD_CS_REQ_PAYLOAD && c->rlen == 0) {
		*buf = uv_buf_init((char *)c->cur->buf + c->payload_got,
				   c->cur->count - c->payload_got);
		return;
	}
	if (c->rpos && c->rcap - c->rlen < NBD_RBUF_SIZE / 2) {
		memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
		c->rlen -= c->rpos;
		c->rpos = 0;
	}
	*buf = uv_buf_init((char *)c->rbuf + c->rlen, c->rcap - c->rlen);
}

void nbd__read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
	struct nbd_conn *c = st->data;

	if (nread < 0) {
		if (nread == UV_EOF && c->state != NBD_CS_REQ_PAYLOAD &&
		    c->state != NBD_CS_REQ_DISCARD && c->rpos == c->rlen)
			nbd__conn_drain(c);    /* clean hang-up: finish what was asked */
		else
			nbd__conn_close(c, nread == UV_EOF ? "truncated input" :
					uv_strerror((int)nread));
		return;
	}
	if (nread == 0)
		return;
	if (c->state == NBD_CS_REQ_PAYLOAD &&
	    buf->base == (char *)c->cur->buf + c->payload_got) {
		c->payload_got += (uint32_t)nread;
		if (c->payload_got == c->cur->count)
			conn_payload_done(c);
	} else {
		c->rlen += (size_t)nread;
	}
	nbd__conn_process(c);
}

/* ---- connection lifetime ---- */

static void conn_close_cb(uv_handle_t *h)
{
	struct nbd_conn *c = h->data;
	struct nbd_server *s = c->s;

	if (--c->handles_open)
		return;    /* the socket or the handshake timer is still closing */
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->n_conns--;
	nbd__log_conn_closed(c);
	nbd__tls_free(c);
	free(c->rbuf);
	free(c);
	nbd__server_check_done(s);
}

void nbd__conn_maybe_finish(struct nbd_conn *c)
{
	if (c->handle_closing)
		return;
	/*
	 * Closing: wait only for the engine (it holds our request structs);
	 * uv_close cancels pending writes.  Draining: also let replies go out.
	 */
	if (c->engine_pending || c->cur)
		return;
	if (c->draining && !c->closing && (c->in_flight || c->writes_pending))
		return;
	if (c->draining && !c->closing && nbd__tls_bye(c))
		return;    /* close_notify first */
	c->handle_closing = true;
	nbd__tls_close(c, conn_close_cb);
	if (c->hs_timer_inited)
		uv_close((uv_handle_t *)&c->hs_timer, conn_close_cb);
	uv_close(&c->h.handle, conn_close_cb);
}

void nbd__conn_close(struct nbd_conn *c, const char *why)
{
	if (c->closing)
		return;
	if (why)
		nbd__log(c->s, TIER_LOG_INFO, "nbd: closing connection %llu: %s",
			 (unsigned long long)c->id, why);
	c->closing = true;
	uv_read_stop(&c->h.stream);
	conn_drop_queued(c);
	if (c->cur) {            /* a WRITE whose payload never came */
		struct nbd_req *r = c->cur;

		c->cur = NULL;
		req_release(r);
	}
	nbd__conn_maybe_finish(c);
}

void nbd__conn_drain(struct nbd_conn *c)
{
	if (c->closing || c->draining)
		return;
	c->draining = true;
	uv_read_stop(&c->h.stream);
	if (c->cur) {
		struct nbd_req *r = c->cur;

		c->cur = NULL;
		req_release(r);
	}
	nbd__conn_maybe_finish(c);
}

void nbd__conn_accept(struct nbd_server *s, uv_stream_t *listener, bool is_tcp)
{
	struct nbd_conn *c = calloc(1, sizeof(*c));
	int rc;

	if (!c || !(c->rbuf = malloc(NBD_RBUF_SIZE))) {
		free(c);
		nbd__log(s, TIER_LOG_ERROR, "nbd: out of memory accepting a connection");
		return;
	}
	c->rcap = NBD_RBUF_SIZE;
	c->s = s;
	c->id = ++s->next_conn_id;
	if (is_tcp)
		rc = uv_tcp_init(s->loop, &c->h.tcp);
	else
		rc = uv_pipe_init(s->loop, &c->h.pipe, 0);
	if (rc < 0) {
		free(c->rbuf);
		free(c);
		return;
	}
	c->handles_open = 1;
	c->h.handle.data = c;
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->n_conns++;
	rc = uv_accept(listener, &c->h.stream);
	if (rc < 0) {
		nbd__log(s, TIER_LOG_WARN, "nbd: accept: %s", uv_strerror(rc));
		c->closing = true;
		nbd__conn_maybe_finish(c);
		return;
	}
	if (is_tcp)
		uv_tcp_nodelay(&c->h.tcp, 1);
	nbd__log(s, TIER_LOG_DEBUG, "nbd: connection %llu accepted",
		 (unsigned long long)c->id);
	nbd__handshake_start(c);
	if (!c->closing)
		nbd__conn_read_start(c);
}

/* ---- server ---- */

int nbd_server_create(const struct nbd_server_opts *o, struct nbd_server **out)
{
	struct nbd_server *s;
	char dummy[8];
	int rc;

	*out = NULL;
	if (!o || !o->loop)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->loop = o->loop;
	s->log = o->log;
	s->log_arg = o->log_arg;
	if (o->io_thread && (rc = nbd__xt_create(s, o->loop, o->busy_poll_us)) < 0) {
		nbd__xt_destroy(s);
		free(s);
		return rc;
	}
	nbd_server_set_limits(s, o->max_requests_per_conn, o->max_bytes_per_conn);
	nbd_server_set_handshake_timeout(s, o->handshake_timeout_ms);
	nbd__server_limits_init(s, o);
	rc = nbd__tls_create(s, o, o->err ? o->err : dummy, o->err ? o->errlen : sizeof(dummy));
	if (rc < 0) {
		nbd__tls_destroy(s);
		nbd__xt_destroy(s);
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

/* The daemon's calls, carried to the server's thread (nbd_server_exec). */
struct nbd_xcall {
	struct nbd_server *s;
	const char *name;
	uint64_t a, b;
	bool flag;
	int rc;
	size_t n;
	void (*done)(void *);
	void *done_arg;
};

static void x_set_limits(void *arg)
{
	struct nbd_xcall *x = arg;
	struct nbd_server *s = x->s;
	struct nbd_conn *c;

	s->max_requests = x->a ? (uint32_t)x->a : NBD_DEFAULT_MAX_REQUESTS;
	s->max_bytes = x->b ? x->b : NBD_DEFAULT_MAX_BYTES;
	for (c = s->conns; c; c = c->next)
		if (c->paused && !c->closing && !c->draining)
			nbd__conn_resume(c);
}

void nbd_server_set_limits(struct nbd_server *s, uint32_t max_requests, uint64_t max_bytes)
{
	struct nbd_xcall x = { .s = s, .a = max_requests, .b = max_bytes };

	nbd_server_exec(s, x_set_limits, &x);
}

static void x_set_hs_timeout(void *arg)
{
	struct nbd_xcall *x = arg;

	x->s->hs_timeout_ms = x->a ? x->a : NBD_DEFAULT_HS_TIMEOUT_MS;
}

void nbd_server_set_handshake_timeout(struct nbd_server *s, uint64_t ms)
{
	struct nbd_xcall x = { .s = s, .a = ms };

	nbd_server_exec(s, x_set_hs_timeout, &x);
}

static void export_set_ro(struct nbd_export *x, bool read_only)
{
	x->read_only = read_only;
	x->eflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_CACHE | NBD_FLAG_CAN_MULTI_CONN;
	if (read_only)
		x->eflags |= NBD_FLAG_READ_ONLY;
	else
		x->eflags |= NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |
			     NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES |
			     NBD_FLAG_SEND_FAST_ZERO;
}

static void x_set_read_only(void *arg)
{
	struct nbd_xcall *c = arg;
	struct nbd_export *x = c->name[0] ? nbd__find_export(c->s, c->name) : NULL;

	c->rc = x ? 0 : -ENOENT;
	if (x)
		export_set_ro(x, c->flag);
}

int nbd_server_set_read_only(struct nbd_server *s, const char *name, bool read_only)
{
	struct nbd_xcall x = { .s = s, .name = name, .flag = read_only };

	nbd_server_exec(s, x_set_read_only, &x);
	return x.rc;
}

static void x_close_export(void *arg)
{
	struct nbd_xcall *x = arg;
	struct nbd_export *e = nbd__find_export(x->s, x->name);
	struct nbd_conn *c, *next;

	if (e && x->name[0])
		e->gen++;
	for (c = x->s->conns; c; c = next) {
		next = c->next;    /* conn_close only schedules the close */
		if (c->exp && !c->closing && !strcmp(c->exp->name, x->name)) {
			nbd__conn_close(c, x->done_arg);
			x->n++;
		}
	}
}

size_t nbd_server_close_export(struct nbd_server *s, const char *name, const char *why)
{
	struct nbd_xcall x = { .s = s, .name = name, .done_arg = (void *)why };

	nbd_server_exec(s, x_close_export, &x);
	return x.n;
}

int nbd_server_add_export(struct nbd_server *s, struct tier_image *img, bool read_only)
{
	const char *name = tier_image_name(img);
	struct nbd_export *x;

	if (nbd__find_export(s, name))
		return -EEXIST;
	x = calloc(1, sizeof(*x));
	if (!x || !(x->name = strdup(name))) {
		free(x);
		return -ENOMEM;
	}
	x->img = img;
	x->size = tier_image_size(img);
	export_set_ro(x, read_only);
	/* append: the first export answers the default name */
	if (!s->exports) {
		s->exports = x;
	} else {
		struct nbd_export *t = s->exports;

		while (t->next)
			t = t->next;
		t->next = x;
	}
	return 0;
}

struct nbd_export *nbd__find_export(struct nbd_server *s, const char *name)
{
	struct nbd_export *x;

	if (!name[0])
		return s->exports;
	for (x = s->exports; x; x = x->next)
		if (!strcmp(x->name, name))
			return x;
	return NULL;
}

static void x_counts(void *arg)
{
	struct nbd_xcall *x = arg;

	x->n = x->flag ? x->s->n_conns : x->s->in_flight;
}

size_t nbd_server_connections(const struct nbd_server *s)
{
	struct nbd_xcall x = { .s = (struct nbd_server *)s, .flag = true };

	nbd_server_exec(x.s, x_counts, &x);
	return x.n;
}

size_t nbd_server_in_flight(const struct nbd_server *s)
{
	struct nbd_xcall x = { .s = (struct nbd_server *)s };

	nbd_server_exec(x.s, x_counts, &x);
	return x.n;
}

void nbd__server_check_done(struct nbd_server *s)
{
	void (*done)(void *) = s->done;

	if (!s->shutting_down || s->n_conns || s->n_listeners_open || !done)
		return;
	s->done = NULL;
	done(s->done_arg);
}

static void x_shutdown(void *arg)
{
	struct nbd_xcall *x = arg;
	struct nbd_server *s = x->s;
	struct nbd_conn *c, *next;

	s->shutting_down = true;
	s->done = x->done;
	s->done_arg = x->done_arg;
	nbd__listeners_close(s);
	for (c = s->conns; c; c = next) {
		next = c->next;    /* conn_maybe_finish only schedules the close */
		if (c->state != NBD_CS_REQ_HDR && c->state != NBD_CS_REQ_PAYLOAD &&
		    c->state != NBD_CS_REQ_DISCARD)
			nbd__conn_close(c, "server shutting down");
		else
			nbd__conn_drain(c);
	}
	nbd__server_check_done(s);
}

void nbd_server_shutdown(struct nbd_server *s, void (*done)(void *arg), void *arg)
{
	struct nbd_xcall x = { .s = s, .done = done, .done_arg = arg };

	if (s->xt)   /* done goes back to the engine's thread */
		nbd__xt_shutdown_done(s, done, arg, &x.done, &x.done_arg);
	nbd_server_exec(s, x_shutdown, &x);
	/* not started: no thread runs the server's loop; close its listeners here */
	if (s->xt && !nbd__xt_started(s))
		uv_run(s->loop, UV_RUN_NOWAIT);
}

void nbd_server_destroy(struct nbd_server *s)
{
	struct nbd_export *x, *xn;
	struct nbd_req *r, *rn;
	unsigned k;

	if (!s)
		return;
	nbd__xt_destroy(s);
	for (x = s->exports; x; x = xn) {
		xn = x->next;
		free(x->name);
		free(x);
	}
	for (r = s->free_reqs; r; r = rn) {
		rn = r->next_free;
		free(r);
	}
	for (k = 0; k < NBD_BUF_CLASSES; k++) {
		struct nbd_freebuf *fb, *fn;

		for (fb = s->free_bufs[k]; fb; fb = fn) {
			fn = fb->next;
			free(fb);
		}
	}
	nbd__listeners_free(s);
	nbd__tls_destroy(s);
	free(s);
}
