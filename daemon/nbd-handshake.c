/* SPDX-License-Identifier: MIT */
/*
 * daemon/nbd-handshake.c - NBD listeners and the fixed newstyle handshake.
 * Decides which options a client may negotiate (EXPORT_NAME, ABORT, LIST,
 * INFO, GO, STRUCTURED_REPLY; everything else NBD_REP_ERR_UNSUP) and what it
 * learns about each export.  Input that breaks the handshake framing (bad
 * magic, unknown client flags, absurd option lengths) closes that connection
 * and nothing else; it must never trust a length before checking it against
 * what is buffered.  A client must reach transmission within the handshake
 * deadline, and option replies it does not read stop the server reading its
 * options (so memory stays bounded).
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/nbd-internal.h"

/* Unaligned big-endian access to option data (UBSan-clean). */
static uint32_t get_be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return be32toh(v);
}

static uint16_t get_be16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return be16toh(v);
}

static void put_be32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, sizeof(v));
}

static void put_be16(uint8_t *p, uint16_t v)
{
	v = htobe16(v);
	memcpy(p, &v, sizeof(v));
}

/* ---- handshake output (rare, so plain malloc) ---- */

struct nbd_wblock {
	uv_write_t wr;
	struct nbd_conn *c;
	size_t len;
	uint8_t data[];
};

static void wblock_cb(uv_write_t *wr, int status)
{
	struct nbd_wblock *w = wr->data;
	struct nbd_conn *c = w->c;

	c->writes_pending--;
	free(w);
	if (status < 0 && status != UV_ECANCELED && !c->closing)
		nbd__conn_close(c, uv_strerror(status));
	else if (c->closing || c->draining)
		nbd__conn_maybe_finish(c);
	else if (c->paused)
		nbd__conn_resume(c);    /* replies went out: read options again */
}

/* Queue a + b as one write.  -1 (and the connection closes) on failure. */
static int conn_send2(struct nbd_conn *c, const void *a, size_t alen,
		      const void *b, size_t blen)
{
	struct nbd_wblock *w;
	uv_buf_t buf;
	int rc;

	if (c->closing)
		return -1;
	w = malloc(sizeof(*w) + alen + blen);
	if (!w) {
		nbd__conn_close(c, "out of memory");
		return -1;
	}
	w->c = c;
	w->len = alen + blen;
	memcpy(w->data, a, alen);
	if (blen)
		memcpy(w->data + alen, b, blen);
	w->wr.data = w;
	buf = uv_buf_init((char *)w->data, (unsigned)w->len);
	rc = uv_write(&w->wr, &c->h.stream, &buf, 1, wblock_cb);
	if (rc < 0) {
		free(w);
		nbd__conn_close(c, uv_strerror(rc));
		return -1;
	}
	c->writes_pending++;
	return 0;
}

static int opt_reply(struct nbd_conn *c, uint32_t opt, uint32_t reply,
		     const void *data, size_t len)
{
	struct nbd_fixed_new_option_reply h = {
		.magic = htobe64(NBD_REP_MAGIC),
		.option = htobe32(opt),
		.reply = htobe32(reply),
		.replylen = htobe32((uint32_t)len),
	};

	return conn_send2(c, &h, sizeof(h), data, len);
}

static int opt_error(struct nbd_conn *c, uint32_t opt, uint32_t reply, const char *msg)
{
	return opt_reply(c, opt, reply, msg, strlen(msg));
}

/* A client that never finishes haggling must not hold a connection forever. */
static void hs_timeout_cb(uv_timer_t *t)
{
	struct nbd_conn *c = t->data;
	char why[96];

	if (c->exp || c->closing)
		return;
	snprintf(why, sizeof(why), "handshake not finished within %llu ms",
		 (unsigned long long)c->s->hs_timeout_ms);
	nbd__conn_close(c, why);
}

void nbd__handshake_start(struct nbd_conn *c)
{
	struct nbd_new_handshake h = {
		.nbdmagic = htobe64(NBD_MAGIC),
		.version = htobe64(NBD_NEW_VERSION),
		.gflags = htobe16(NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES),
	};
	int rc;

	c->state = NBD_CS_CLIENT_FLAGS;
	rc = uv_timer_init(c->s->loop, &c->hs_timer);
	if (rc < 0) {
		nbd__conn_close(c, uv_strerror(rc));
		return;
	}
	c->hs_timer.data = c;
	c->hs_timer_inited = true;
	c->handles_open++;
	uv_timer_start(&c->hs_timer, hs_timeout_cb, c->s->hs_timeout_ms, 0);
	conn_send2(c, &h, sizeof(h), NULL, 0);
}

void nbd__handshake_finish(struct nbd_conn *c, struct nbd_export *x)
{
	if (c->hs_timer_inited)
		uv_timer_stop(&c->hs_timer);
	c->exp = x;
	c->state = NBD_CS_REQ_HDR;
}

/* ---- options ---- */

static int opt_export_name(struct nbd_conn *c, const uint8_t *data, uint32_t len)
{
	static const uint8_t zeroes[NBD_HANDSHAKE_ZEROES];
	struct nbd_new_handshake_finish f;
	char name[NBD_MAX_STRING + 1];
	struct nbd_export *x;

	/* no way to report an error for this option: the protocol says close */
	if (len > NBD_MAX_STRING || memchr(data, 0, len)) {
		nbd__conn_close(c, "bad export name");
		return -1;
	}
	memcpy(name, data, len);
	name[len] = 0;
	x = nbd__find_export(c->s, name);
	if (!x) {
		nbd__conn_close(c, "unknown export requested");
		return -1;
	}
	f.exportsize = htobe64(x->size);
	f.eflags = htobe16(x->eflags);
	if (conn_send2(c, &f, sizeof(f), zeroes, c->no_zeroes ? 0 : sizeof(zeroes)) < 0)
		return -1;
	nbd__handshake_finish(c, x);
	return 1;
}

static int opt_list(struct nbd_conn *c, uint32_t len)
{
	struct nbd_export *x;

	if (len)
		return opt_error(c, NBD_OPT_LIST, NBD_REP_ERR_INVALID,
				 "LIST takes no data") < 0 ? -1 : 1;
	for (x = c->s->exports; x; x = x->next) {
		uint8_t buf[4 + NBD_MAX_STRING];
		size_t n = strlen(x->name);

		if (n > NBD_MAX_STRING)
			continue;
		put_be32(buf, (uint32_t)n);
		memcpy(buf + 4, x->name, n);
		if (opt_reply(c, NBD_OPT_LIST, NBD_REP_SERVER, buf, 4 + n) < 0)
			return -1;
	}
	return opt_reply(c, NBD_OPT_LIST, NBD_REP_ACK, NULL, 0) < 0 ? -1 : 1;
}

/* NBD_OPT_INFO and NBD_OPT_GO: u32 namelen, name, u16 n, n * u16 info. */
static int opt_info_go(struct nbd_conn *c, uint32_t opt, const uint8_t *d, uint32_t len)
{
	struct nbd_fixed_new_option_reply_info_export ie;
	struct nbd_fixed_new_option_reply_info_block_size bs;
	char name[NBD_MAX_STRING + 1];
	bool want_name = false;
	struct nbd_export *x;
	uint32_t namelen, i;
	uint16_t n;

	if (len < 6)
		goto invalid;
	namelen = get_be32(d);
	if (namelen > NBD_MAX_STRING || namelen > len - 6)
		goto invalid;
	n = get_be16(d + 4 + namelen);
	if ((uint64_t)len != 6 + (uint64_t)namelen + 2ull * n)
		goto invalid;
	if (memchr(d + 4, 0, namelen))
		goto invalid;
	memcpy(name, d + 4, namelen);
	name[namelen] = 0;
	for (i = 0; i < n; i++)
		if (get_be16(d + 6 + namelen + 2 * i) == NBD_INFO_NAME)
			want_name = true;
	x = nbd__find_export(c->s, name);
	if (!x)
		return opt_error(c, opt, NBD_REP_ERR_UNKNOWN, "no such export") < 0 ? -1 : 1;

	ie.info = htobe16(NBD_INFO_EXPORT);
	ie.exportsize = htobe64(x->size);
	ie.eflags = htobe16(x->eflags);
	if (opt_reply(c, opt, NBD_REP_INFO, &ie, sizeof(ie)) < 0)
		return -1;
	bs.info = htobe16(NBD_INFO_BLOCK_SIZE);
	bs.minimum = htobe32(1);
	bs.preferred = htobe32(NBD_PREF_BLOCK_SIZE);
	bs.maximum = htobe32(NBD_MAX_BLOCK_SIZE);
	if (opt_reply(c, opt, NBD_REP_INFO, &bs, sizeof(bs)) < 0)
		return -1;
	if (want_name) {
		uint8_t buf[2 + NBD_MAX_STRING];
		size_t nl = strlen(x->name);

		put_be16(buf, NBD_INFO_NAME);
		memcpy(buf + 2, x->name, nl);
		if (opt_reply(c, opt, NBD_REP_INFO, buf, 2 + nl) < 0)
			return -1;
	}
	if (opt_reply(c, opt, NBD_REP_ACK, NULL, 0) < 0)
		return -1;
	if (opt == NBD_OPT_GO)
		nbd__handshake_finish(c, x);
	return 1;
invalid:
	return opt_error(c, opt, NBD_REP_ERR_INVALID, "malformed INFO/GO request") < 0 ? -1 : 1;
}

static int opt_handle(struct nbd_conn *c, uint32_t opt, const uint8_t *data, uint32_t len)
{
	switch (opt) {
	case NBD_OPT_EXPORT_NAME:
		return opt_export_name(c, data, len);
	case NBD_OPT_ABORT:
		opt_reply(c, opt, NBD_REP_ACK, NULL, 0);
		nbd__conn_drain(c);
		return -1;
	case NBD_OPT_LIST:
		return opt_list(c, len);
	case NBD_OPT_INFO:
	case NBD_OPT_GO:
		return opt_info_go(c, opt, data, len);
	case NBD_OPT_STRUCTURED_REPLY:
		if (len)
			return opt_error(c, opt, NBD_REP_ERR_INVALID,
					 "STRUCTURED_REPLY takes no data") < 0 ? -1 : 1;
		c->structured = true;
		return opt_reply(c, opt, NBD_REP_ACK, NULL, 0) < 0 ? -1 : 1;
	default:
		return opt_error(c, opt, NBD_REP_ERR_UNSUP, "option not supported") < 0 ? -1 : 1;
	}
}

int nbd__handshake_step(struct nbd_conn *c)
{
	size_t avail = c->rlen - c->rpos;
	const uint8_t *p = c->rbuf + c->rpos;
	struct nbd_new_option h;

	switch (c->state) {
	case NBD_CS_CLIENT_FLAGS: {
		uint32_t flags;

		if (avail < 4)
			return 0;
		flags = get_be32(p);
		c->rpos += 4;
		if (flags & ~NBD_FLAG_C_MASK) {
			nbd__conn_close(c, "unknown client flags");
			return -1;
		}
		c->no_zeroes = flags & NBD_FLAG_C_NO_ZEROES;
		c->state = NBD_CS_OPT_HDR;
		return 1;
	}
	case NBD_CS_OPT_HDR:
		if (avail < sizeof(h))
			return 0;
		memcpy(&h, p, sizeof(h));
		h.option = be32toh(h.option);
		h.optlen = be32toh(h.optlen);
		if (be64toh(h.version) != NBD_NEW_VERSION) {
			nbd__conn_close(c, "garbage during option haggling");
			return -1;
		}
		if (h.optlen > NBD_OPT_MAX) {
			if (h.option == NBD_OPT_EXPORT_NAME || h.optlen > NBD_OPT_DISCARD_MAX) {
				nbd__conn_close(c, "option too long");
				return -1;
			}
			c->rpos += sizeof(h);
			c->opt = h.option;
			c->discard_left = h.optlen;
			c->state = NBD_CS_OPT_DISCARD;
			return 1;
		}
		if (avail < sizeof(h) + h.optlen)
			return 0;
		c->rpos += sizeof(h) + h.optlen;
		return opt_handle(c, h.option, p + sizeof(h), h.optlen);
	case NBD_CS_OPT_DISCARD: {
		uint64_t n = avail < c->discard_left ? avail : c->discard_left;

		c->rpos += n;
		c->discard_left -= n;
		if (c->discard_left)
			return 0;
		c->state = NBD_CS_OPT_HDR;
		return opt_error(c, c->opt, NBD_REP_ERR_TOO_BIG, "option too long") < 0 ? -1 : 1;
	}
	default:
		return 0;
	}
}

/* ---- listeners ---- */

static void listener_close_cb(uv_handle_t *h)
{
	struct nbd_listener *l = h->data;

	l->s->n_listeners_open--;
	nbd__server_check_done(l->s);
}

static void on_connection(uv_stream_t *st, int status)
{
	struct nbd_listener *l = st->data;

	if (status < 0) {
		nbd__log(l->s, TIER_LOG_WARN, "nbd: listen %s: %s", l->addr, uv_strerror(status));
		return;
	}
	nbd__conn_accept(l->s, st, l->is_tcp);
}

static int listen_tcp(struct nbd_listener *l, const char *addr)
{
	struct sockaddr_storage ss;
	char host[256];
	const char *colon = strrchr(addr, ':');
	const char *h = addr;
	size_t hl;
	char *end;
	long port;
	int rc;

	if (!colon)
		return -EINVAL;
	hl = (size_t)(colon - addr);
	if (addr[0] == '[') {
		if (hl < 2 || colon[-1] != ']')
			return -EINVAL;
		h = addr + 1;
		hl -= 2;
	}
	if (hl == 0 || hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = 0;
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	if (errno || *end || end == colon + 1 || port < 0 || port > 65535)
		return -EINVAL;
	if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)&ss) < 0 &&
	    uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)&ss) < 0)
		return -EINVAL;
	rc = uv_tcp_init(l->s->loop, &l->h.tcp);
	if (rc < 0)
		return rc;
	l->s->n_listeners_open++;
	l->inited = true;
	l->is_tcp = true;
	return uv_tcp_bind(&l->h.tcp, (const struct sockaddr *)&ss, 0);
}

static int listen_unix(struct nbd_listener *l, const char *path)
{
	struct stat st;
	int rc;

	if (!path[0])
		return -EINVAL;
	if (!(l->path = strdup(path)))
		return -ENOMEM;
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path);    /* stale socket of an earlier run */
	rc = uv_pipe_init(l->s->loop, &l->h.pipe, 0);
	if (rc < 0)
		return rc;
	l->s->n_listeners_open++;
	l->inited = true;
	return uv_pipe_bind(&l->h.pipe, path);
}

int nbd_server_listen(struct nbd_server *s, const char *addr)
{
	struct nbd_listener *l = calloc(1, sizeof(*l));
	int rc;

	if (!l || !(l->addr = strdup(addr))) {
		free(l);
		return -ENOMEM;
	}
	l->s = s;
	l->h.handle.data = l;
	l->next = s->listeners;
	s->listeners = l;
	if (!strncmp(addr, "unix:", 5))
		rc = listen_unix(l, addr + 5);
	else
		rc = listen_tcp(l, addr);
	if (rc == 0)
		rc = uv_listen(&l->h.stream, 128, on_connection);
	if (rc < 0) {
		free(l->path);     /* do not unlink a socket we never bound */
		l->path = NULL;
		l->closed = true;
		if (l->inited)
			uv_close(&l->h.handle, listener_close_cb);
		nbd__log(s, TIER_LOG_ERROR, "nbd: cannot listen on %s: %s", addr, uv_strerror(rc));
		return rc;
	}
	nbd__log(s, TIER_LOG_INFO, "nbd: listening on %s", addr);
	return 0;
}

void nbd__listeners_close(struct nbd_server *s)
{
	struct nbd_listener *l;

	for (l = s->listeners; l; l = l->next) {
		if (l->closed)
			continue;
		l->closed = true;
		if (l->path)
			unlink(l->path);
		uv_close(&l->h.handle, listener_close_cb);
	}
}

void nbd__listeners_free(struct nbd_server *s)
{
	struct nbd_listener *l, *next;

	for (l = s->listeners; l; l = next) {
		next = l->next;
		free(l->path);
		free(l->addr);
		free(l);
	}
	s->listeners = NULL;
}
