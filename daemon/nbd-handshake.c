/* SPDX-License-Identifier: MIT */
/*
 * daemon/nbd-handshake.c - NBD listeners and the fixed newstyle handshake.
 * Decides which options a client may negotiate (EXPORT_NAME, ABORT, LIST,
 * INFO, GO, STRUCTURED_REPLY, STARTTLS, LIST/SET_META_CONTEXT in nbd-status.c;
 * everything else NBD_REP_ERR_UNSUP),
 * whether it must upgrade to TLS first (tls = require: NBD_REP_ERR_TLS_REQD)
 * and what it learns about each export.  Input that breaks the handshake framing (bad
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
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

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
	rc = nbd__conn_write(c, &w->wr, &buf, 1, wblock_cb);
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

int nbd__opt_reply(struct nbd_conn *c, uint32_t opt, uint32_t reply, const void *data,
		   size_t len)
{
	return opt_reply(c, opt, reply, data, len);
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
	nbd__log_conn_open(c);
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

/*
 * NBD_OPT_STARTTLS: ACK in plaintext, then everything is TLS (proto.md
 * "FORCEDTLS" for require, "SELECTIVETLS" with no TLS-only export for on).
 * What was negotiated before it is forgotten.
 */
static int opt_starttls(struct nbd_conn *c, uint32_t len)
{
	int rc;

	if (nbd__tls_mode(c->s) == NBD_TLS_OFF)
		return opt_error(c, NBD_OPT_STARTTLS, NBD_REP_ERR_POLICY,
				 "TLS is not enabled on this server") < 0 ? -1 : 1;
	if (nbd__tls_active(c))
		return opt_error(c, NBD_OPT_STARTTLS, NBD_REP_ERR_INVALID,
				 "TLS already negotiated") < 0 ? -1 : 1;
	if (len)
		return opt_error(c, NBD_OPT_STARTTLS, NBD_REP_ERR_INVALID,
				 "STARTTLS takes no data") < 0 ? -1 : 1;
	if (opt_reply(c, NBD_OPT_STARTTLS, NBD_REP_ACK, NULL, 0) < 0)
		return -1;
	c->structured = false;
	c->meta_exp = NULL;     /* contexts too (nbd-status.c) */
	c->meta_alloc = false;
	rc = nbd__tls_start(c);
	if (rc < 0) {
		nbd__conn_close(c, "cannot start TLS");
		return -1;
	}
	return 0;    /* input is ciphertext now: the transport hands it back */
}

/* Under tls = require nothing but STARTTLS and ABORT before TLS. */
static bool tls_missing(const struct nbd_conn *c, uint32_t opt)
{
	return nbd__tls_mode(c->s) == NBD_TLS_REQUIRE && !nbd__tls_active(c) &&
	       opt != NBD_OPT_STARTTLS && opt != NBD_OPT_ABORT;
}

static int opt_handle(struct nbd_conn *c, uint32_t opt, const uint8_t *data, uint32_t len)
{
	if (tls_missing(c, opt)) {
		if (opt == NBD_OPT_EXPORT_NAME) {    /* cannot be refused: close */
			nbd__conn_close(c, "EXPORT_NAME without TLS (tls = require)");
			return -1;
		}
		return opt_error(c, opt, NBD_REP_ERR_TLS_REQD,
				 "TLS required: send NBD_OPT_STARTTLS first") < 0 ? -1 : 1;
	}
	switch (opt) {
	case NBD_OPT_STARTTLS:
		return opt_starttls(c, len);
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
	case NBD_OPT_LIST_META_CONTEXT:
	case NBD_OPT_SET_META_CONTEXT:
		return nbd__opt_meta_context(c, opt, data, len);
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

/* ---- limits across connections ---- */

void nbd__server_limits_init(struct nbd_server *s, const struct nbd_server_opts *o)
{
	struct rlimit rl;

	s->max_total_bytes = o->max_bytes_in_flight ? o->max_bytes_in_flight :
			     NBD_DEFAULT_TOTAL_BYTES;
	s->tx_timeout_ms = o->transmission_timeout_ms ? o->transmission_timeout_ms :
			   NBD_DEFAULT_TX_TIMEOUT_MS;
	s->sock_mode = o->socket_mode ? o->socket_mode : 0660;
	s->sock_gid = o->socket_gid_set ? o->socket_gid : (gid_t)-1;
	if (o->max_connections) {
		s->max_conns = o->max_connections;
		return;
	}
	/* each connection costs one descriptor; keep a quarter for the rest */
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur > (1u << 20))
		rl.rlim_cur = 1u << 20;
	{
		rlim_t reserve = rl.rlim_cur / 4 > NBD_FD_RESERVE_MIN ? rl.rlim_cur / 4 :
				 NBD_FD_RESERVE_MIN;

		s->max_conns = rl.rlim_cur > reserve + 1 ? (size_t)(rl.rlim_cur - reserve) : 1;
	}
}

bool nbd__global_over(const struct nbd_server *s)
{
	/* a request is read while the budget is not spent: what is held stays
	 * under it plus one request; one at a time always (a budget below
	 * NBD_MAX_BLOCK_SIZE must not deadlock) */
	return s->bytes_in_flight && s->bytes_in_flight >= s->max_total_bytes;
}

void nbd__bytes_release(struct nbd_server *s, uint64_t n)
{
	bool was_over = nbd__global_over(s);
	struct nbd_conn *c;

	s->bytes_in_flight -= n;
	if (!was_over || nbd__global_over(s))
		return;
	for (c = s->conns; c && !nbd__global_over(s); c = c->next)
		if (c->paused && c->exp && !c->closing && !c->draining)
			nbd__conn_resume(c);
}

static void payload_timeout_cb(uv_timer_t *t)
{
	struct nbd_conn *c = t->data;
	char why[96];

	if (c->closing || !c->cur)
		return;
	snprintf(why, sizeof(why), "WRITE payload not received within %llu ms",
		 (unsigned long long)c->s->tx_timeout_ms);
	nbd__conn_close(c, why);
}

void nbd__payload_deadline(struct nbd_conn *c, bool on)
{
	if (!c->hs_timer_inited || c->handle_closing)
		return;
	if (on)
		uv_timer_start(&c->hs_timer, payload_timeout_cb, c->s->tx_timeout_ms, 0);
	else
		uv_timer_stop(&c->hs_timer);
}

size_t nbd_server_max_connections(const struct nbd_server *s)
{
	return s->max_conns;
}

uint64_t nbd_server_refused(const struct nbd_server *s)
{
	return s->refused_conns;
}

/* ---- listeners ---- */

struct refused {
	union {
		uv_handle_t handle;
		uv_stream_t stream;
		uv_tcp_t tcp;
		uv_pipe_t pipe;
	} h;
};

static void refused_close_cb(uv_handle_t *h)
{
	free(h->data);
}

/* Over max_connections: take it off the backlog and close it, nothing said. */
static void refuse_connection(struct nbd_listener *l, uv_stream_t *st)
{
	struct nbd_server *s = l->s;
	struct refused *r = calloc(1, sizeof(*r));
	uint64_t now = uv_now(s->loop);

	s->refused_conns++;
	if (now - s->last_refusal_log_ms >= 1000 || !s->last_refusal_log_ms) {
		s->last_refusal_log_ms = now ? now : 1;
		nbd__log(s, TIER_LOG_WARN, "nbd: %zu connections open (max_connections): "
			 "refusing new ones (%llu so far)", s->n_conns,
			 (unsigned long long)s->refused_conns);
	}
	if (!r)
		return;
	if ((l->is_tcp ? uv_tcp_init(s->loop, &r->h.tcp) : uv_pipe_init(s->loop, &r->h.pipe, 0)) < 0) {
		free(r);
		return;
	}
	r->h.handle.data = r;
	(void)uv_accept(st, &r->h.stream);
	uv_close(&r->h.handle, refused_close_cb);
}

/* Unlink only our own socket file, not a successor's. */
static void unlink_own(const struct nbd_listener *l)
{
	struct stat st;

	if (stat(l->path, &st) == 0 && st.st_ino == l->ino)
		unlink(l->path);
}

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
	if (l->s->n_conns >= l->s->max_conns) {
		refuse_connection(l, st);
		return;
	}
	nbd__conn_accept(l->s, st, l->is_tcp);
}

int nbd_parse_tcp_addr(const char *addr, struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	const char *colon = strrchr(addr, ':');
	const char *h = addr;
	char host[256], *end;
	size_t hl;
	long port;

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
	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		*len = sizeof(*s4);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*s6);
		return 0;
	}
	return -EINVAL;
}

static int listen_tcp(struct nbd_listener *l, const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int rc;

	if (nbd_parse_tcp_addr(addr, &ss, &len) < 0)
		return -EINVAL;
	rc = uv_tcp_init(l->s->loop, &l->h.tcp);
	if (rc < 0)
		return rc;
	l->s->n_listeners_open++;
	l->inited = true;
	l->is_tcp = true;
	return uv_tcp_bind(&l->h.tcp, (const struct sockaddr *)&ss, 0);
}

/* A socket file nobody answers on is stale; a live one is another daemon's. */
static int unix_check_existing(const char *path, const struct sockaddr_un *sa)
{
	struct stat st;
	int fd, r = 0;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
		r = -EADDRINUSE;
	close(fd);
	return r;
}

/*
 * Bind under a temporary name, give it its mode and group, then rename it
 * over path: the socket never exists under path with the umask's mode, and
 * a live socket of another daemon is never replaced.
 */
static int listen_unix(struct nbd_listener *l, const char *path)
{
	struct nbd_server *s = l->s;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char tmp[sizeof(sa.sun_path) + 32];
	struct stat st;
	int fd = -1, rc;

	if (!path[0] || strlen(path) >= sizeof(sa.sun_path))
		return -EINVAL;
	strcpy(sa.sun_path, path);
	if (!(l->path = strdup(path)))
		return -ENOMEM;
	rc = unix_check_existing(path, &sa);
	if (rc < 0) {
		if (rc == -EADDRINUSE)
			nbd__log(s, TIER_LOG_ERROR, "nbd: %s is served by a running process "
				 "(another tierd?): refusing to take it over", path);
		goto fail;
	}
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
	if (strlen(tmp) >= sizeof(sa.sun_path)) {
		rc = -ENAMETOOLONG;
		goto fail;
	}
	strcpy(sa.sun_path, tmp);
	unlink(tmp);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = -errno;
		goto fail;
	}
	if (chmod(tmp, s->sock_mode) < 0 ||
	    (s->sock_gid != (gid_t)-1 && chown(tmp, (uid_t)-1, s->sock_gid) < 0) ||
	    rename(tmp, path) < 0 || stat(path, &st) < 0) {
		rc = -errno;
		unlink(tmp);
		goto fail;
	}
	l->ino = st.st_ino;
	rc = uv_pipe_init(s->loop, &l->h.pipe, 0);
	if (rc < 0)
		goto fail_bound;
	s->n_listeners_open++;
	l->inited = true;
	rc = uv_pipe_open(&l->h.pipe, fd);
	if (rc < 0)
		goto fail_bound;
	return 0;
fail_bound:
	unlink(path);
fail:
	if (fd >= 0)
		close(fd);
	free(l->path);     /* never unlink a socket we did not bind */
	l->path = NULL;
	return rc;
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
		if (l->path && l->ino)
			unlink_own(l);
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
			unlink_own(l);
		uv_close(&l->h.handle, listener_close_cb);
	}
}

void nbd_server_cut(struct nbd_server *s)
{
	struct nbd_conn *c, *next;

	for (c = s->conns; c; c = next) {
		next = c->next;
		nbd__conn_close(c, "shutdown: replies not read in time");
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
