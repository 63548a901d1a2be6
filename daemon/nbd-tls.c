/* SPDX-License-Identifier: MIT */
/*
 * daemon/nbd-tls.c - the NBD connection's transport: plain libuv stream, or
 * GnuTLS once a client sent NBD_OPT_STARTTLS.  It decides which credentials
 * the server offers (X.509 from a directory holding ca-cert.pem,
 * server-cert.pem and server-key.pem, optionally requiring a client
 * certificate signed by that CA; PSK from a psktool file), how ciphertext
 * moves between the socket and GnuTLS (memory buffers: GnuTLS never touches
 * the socket, so nothing blocks the loop), and when a reply is on the wire.
 * nbd.c and nbd-handshake.c see only plaintext through nbd__conn_write and
 * nbd__conn_read_start.  It must never hand plaintext to the NBD parser
 * before the TLS handshake finished, never keep more than one TLS record
 * window of ciphertext per connection while the parser is paused, and never
 * block.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <gnutls/gnutls.h>

#include "daemon/nbd-internal.h"

#define TLS_IN_SIZE  (64u * 1024)   /* ciphertext buffer: > 3 TLS records */

struct nbd_tls {
	enum nbd_tls_mode mode;
	gnutls_certificate_credentials_t x509;
	gnutls_psk_server_credentials_t psk;
	gnutls_priority_t prio;
	bool verify_peer;
};

/* A write of ciphertext; orig (may be NULL) is the caller's plaintext write. */
struct tls_out {
	uv_write_t w;
	uv_write_t *orig;
	uv_write_cb cb;
	struct nbd_conn *c;
	bool tracked;        /* counted in c->writes_pending by us (close_notify) */
	size_t len, cap;
	uint8_t *data;
};

struct nbd_tls_conn {
	gnutls_session_t session;
	uv_idle_t idle;          /* pumps buffered plaintext after a pause */
	bool idle_inited, hs_done, eof, bye_sent;
	uint8_t *in;             /* ciphertext from the socket */
	size_t in_pos, in_len;
	struct tls_out *out;     /* collecting a write's records, or NULL */
	int push_err;
};

/* ---- server credentials ---- */

static int path_in(char *out, size_t len, const char *dir, const char *name)
{
	int n = snprintf(out, len, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int nbd__tls_create(struct nbd_server *s, const struct nbd_server_opts *o,
		    char *err, size_t errlen)
{
	struct nbd_tls *t;
	char ca[4096], cert[4096], key[4096];
	const char *prio;
	struct stat st;
	int rc;

	if (o->tls == NBD_TLS_OFF)
		return 0;
	if (!(o->tls_certificates && o->tls_certificates[0]) &&
	    !(o->tls_psk_file && o->tls_psk_file[0])) {
		snprintf(err, errlen, "tls = on|require needs tls_certificates or tls_psk_file");
		return -EINVAL;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	s->tls = t;
	t->mode = o->tls;
	if (o->tls_certificates && o->tls_certificates[0]) {
		const char *d = o->tls_certificates;

		if (path_in(ca, sizeof(ca), d, "ca-cert.pem") < 0 ||
		    path_in(cert, sizeof(cert), d, "server-cert.pem") < 0 ||
		    path_in(key, sizeof(key), d, "server-key.pem") < 0) {
			snprintf(err, errlen, "tls_certificates: path too long");
			return -ENAMETOOLONG;
		}
		if (gnutls_certificate_allocate_credentials(&t->x509) < 0)
			return -ENOMEM;
		rc = gnutls_certificate_set_x509_key_file(t->x509, cert, key, GNUTLS_X509_FMT_PEM);
		if (rc < 0) {
			snprintf(err, errlen, "tls_certificates: %s, %s: %s", cert, key,
				 gnutls_strerror(rc));
			return -EINVAL;
		}
		if (stat(ca, &st) == 0) {
			rc = gnutls_certificate_set_x509_trust_file(t->x509, ca,
								    GNUTLS_X509_FMT_PEM);
			if (rc < 0) {
				snprintf(err, errlen, "tls_certificates: %s: %s", ca,
					 gnutls_strerror(rc));
				return -EINVAL;
			}
		} else if (o->tls_verify_peer) {
			snprintf(err, errlen, "tls_verify_peer needs %s", ca);
			return -ENOENT;
		}
		gnutls_certificate_set_known_dh_params(t->x509, GNUTLS_SEC_PARAM_MEDIUM);
		t->verify_peer = o->tls_verify_peer;
	} else if (o->tls_verify_peer) {
		snprintf(err, errlen, "tls_verify_peer needs tls_certificates");
		return -EINVAL;
	}
	if (o->tls_psk_file && o->tls_psk_file[0]) {
		if (stat(o->tls_psk_file, &st) < 0) {
			rc = -errno;
			snprintf(err, errlen, "tls_psk_file %s: %s", o->tls_psk_file, strerror(errno));
			return rc;
		}
		if (gnutls_psk_allocate_server_credentials(&t->psk) < 0)
			return -ENOMEM;
		/* psktool's format, "username:hexkey" per line, read by GnuTLS */
		rc = gnutls_psk_set_server_credentials_file(t->psk, o->tls_psk_file);
		if (rc < 0) {
			snprintf(err, errlen, "tls_psk_file %s: %s", o->tls_psk_file,
				 gnutls_strerror(rc));
			return -EINVAL;
		}
		gnutls_psk_set_server_known_dh_params(t->psk, GNUTLS_SEC_PARAM_MEDIUM);
	}
	/* TLS 1.2 at least (NBD proto.md); PSK key exchanges only with a PSK file */
	prio = o->tls_priority && o->tls_priority[0] ? o->tls_priority :
	       t->psk ? "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:+ECDHE-PSK:+DHE-PSK:+PSK" :
			"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2";
	rc = gnutls_priority_init(&t->prio, prio, NULL);
	if (rc < 0) {
		snprintf(err, errlen, "tls_priority '%s': %s", prio, gnutls_strerror(rc));
		return -EINVAL;
	}
	return 0;
}

void nbd__tls_destroy(struct nbd_server *s)
{
	struct nbd_tls *t = s->tls;

	if (!t)
		return;
	if (t->prio)
		gnutls_priority_deinit(t->prio);
	if (t->x509)
		gnutls_certificate_free_credentials(t->x509);
	if (t->psk)
		gnutls_psk_free_server_credentials(t->psk);
	free(t);
	s->tls = NULL;
}

enum nbd_tls_mode nbd__tls_mode(const struct nbd_server *s)
{
	return s->tls ? s->tls->mode : NBD_TLS_OFF;
}

/* ---- ciphertext out ---- */

static void out_free(struct tls_out *o)
{
	free(o->data);
	free(o);
}

static void out_cb(uv_write_t *w, int status)
{
	struct tls_out *o = w->data;
	struct nbd_conn *c = o->c;

	if (o->orig)
		o->cb(o->orig, status);
	if (o->tracked) {
		c->writes_pending--;
		nbd__conn_maybe_finish(c);
	}
	out_free(o);
}

static struct tls_out *out_new(struct nbd_conn *c, size_t cap)
{
	struct tls_out *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->c = c;
	o->cap = cap ? cap : 256;
	o->data = malloc(o->cap);
	if (!o->data) {
		free(o);
		return NULL;
	}
	o->w.data = o;
	return o;
}

static int out_append(struct tls_out *o, const void *p, size_t n)
{
	if (o->len + n > o->cap) {
		size_t cap = o->cap * 2 > o->len + n ? o->cap * 2 : o->len + n;
		uint8_t *d = realloc(o->data, cap);

		if (!d)
			return -ENOMEM;
		o->data = d;
		o->cap = cap;
	}
	memcpy(o->data + o->len, p, n);
	o->len += n;
	return 0;
}

static int out_send(struct nbd_conn *c, struct tls_out *o)
{
	uv_buf_t b = uv_buf_init((char *)o->data, (unsigned)o->len);

	return uv_write(&o->w, &c->h.stream, &b, 1, out_cb);
}

/* GnuTLS push: into the write being collected, or a write of its own. */
static ssize_t tls_push(gnutls_transport_ptr_t ptr, const void *data, size_t len)
{
	struct nbd_conn *c = ptr;
	struct nbd_tls_conn *t = c->tls;
	struct tls_out *o;
	int rc;

	if (t->out) {
		if (out_append(t->out, data, len) < 0)
			goto nomem;
		return (ssize_t)len;
	}
	if (c->handle_closing)
		return (ssize_t)len;     /* nobody will read it */
	o = out_new(c, len);
	if (!o || out_append(o, data, len) < 0) {
		if (o)
			out_free(o);
		goto nomem;
	}
	rc = out_send(c, o);
	if (rc < 0) {
		out_free(o);
		t->push_err = rc;
		gnutls_transport_set_errno(t->session, EPIPE);
		return -1;
	}
	return (ssize_t)len;
nomem:
	t->push_err = UV_ENOMEM;
	gnutls_transport_set_errno(t->session, ENOMEM);
	return -1;
}

int nbd__conn_write(struct nbd_conn *c, uv_write_t *wr, const uv_buf_t *bufs,
		    unsigned n, uv_write_cb cb)
{
	struct nbd_tls_conn *t = c->tls;
	struct tls_out *o;
	size_t total = 0;
	unsigned i;
	int rc = 0;

	if (!t)
		return uv_write(wr, &c->h.stream, bufs, n, cb);
	for (i = 0; i < n; i++)
		total += bufs[i].len;
	/* room for the records' headers and tags (< 64 bytes per 16 KiB) */
	o = out_new(c, total + 64 * (total / 16384 + 2));
	if (!o)
		return UV_ENOMEM;
	o->orig = wr;
	o->cb = cb;
	t->out = o;
	gnutls_record_cork(t->session);
	for (i = 0; i < n && rc == 0; i++) {
		size_t off = 0;

		while (off < bufs[i].len) {
			ssize_t k = gnutls_record_send(t->session, bufs[i].base + off,
						       bufs[i].len - off);
			if (k < 0) {
				rc = UV_EPROTO;
				break;
			}
			off += (size_t)k;
		}
	}
	if (rc == 0 && gnutls_record_uncork(t->session, GNUTLS_RECORD_WAIT) < 0)
		rc = UV_EPROTO;
	t->out = NULL;
	if (rc == 0 && t->push_err)
		rc = t->push_err;
	if (rc == 0)
		rc = out_send(c, o);
	if (rc < 0)
		out_free(o);
	return rc;
}

/* ---- ciphertext in ---- */

static ssize_t tls_pull(gnutls_transport_ptr_t ptr, void *data, size_t len)
{
	struct nbd_conn *c = ptr;
	struct nbd_tls_conn *t = c->tls;
	size_t n = t->in_len - t->in_pos;

	if (n == 0) {
		gnutls_transport_set_errno(t->session, EAGAIN);
		return -1;
	}
	if (n > len)
		n = len;
	memcpy(data, t->in + t->in_pos, n);
	t->in_pos += n;
	return (ssize_t)n;
}

static void tls_alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct nbd_conn *c = h->data;
	struct nbd_tls_conn *t = c->tls;

	(void)hint;
	if (t->in_pos == t->in_len) {
		t->in_pos = t->in_len = 0;
	} else if (t->in_pos) {
		memmove(t->in, t->in + t->in_pos, t->in_len - t->in_pos);
		t->in_len -= t->in_pos;
		t->in_pos = 0;
	}
	*buf = uv_buf_init((char *)t->in + t->in_len, (unsigned)(TLS_IN_SIZE - t->in_len));
}

static void tls_fail(struct nbd_conn *c, const char *what, int rc)
{
	char why[160];

	snprintf(why, sizeof(why), "%s: %s", what, gnutls_strerror(rc));
	nbd__conn_close(c, why);
}

/* The handshake: true once it is done (the client is who it claims). */
static bool tls_handshake(struct nbd_conn *c)
{
	struct nbd_tls_conn *t = c->tls;
	int rc;

	if (t->hs_done)
		return true;
	do {
		rc = gnutls_handshake(t->session);
	} while (rc < 0 && !gnutls_error_is_fatal(rc) && rc != GNUTLS_E_AGAIN);
	if (rc == GNUTLS_E_AGAIN) {
		if (t->eof)
			nbd__conn_close(c, "TLS handshake: connection closed by the client");
		return false;
	}
	if (rc < 0) {
		tls_fail(c, "TLS handshake failed", rc);
		return false;
	}
	t->hs_done = true;
	{
		const char *user = t->session && gnutls_auth_get_type(t->session) == GNUTLS_CRD_PSK ?
				   gnutls_psk_server_get_username(t->session) : NULL;
		char *desc = gnutls_session_get_desc(t->session);

		nbd__log(c->s, TIER_LOG_INFO, "nbd: connection %llu: TLS %s%s%s",
			 (unsigned long long)c->id, desc ? desc : "",
			 user ? ", PSK user " : "", user ? user : "");
		gnutls_free(desc);
	}
	return true;
}

/* Decrypt what is buffered into the parser, as far as it takes input. */
static void tls_pump(struct nbd_conn *c)
{
	struct nbd_tls_conn *t = c->tls;

	if (c->closing || !tls_handshake(c))
		return;
	while (!c->paused && !c->closing && !c->draining) {
		uv_buf_t b;
		ssize_t n;

		nbd__alloc_cb(&c->h.handle, 0, &b);
		if (b.len == 0)
			break;
		n = gnutls_record_recv(t->session, b.base, b.len);
		if (n == GNUTLS_E_AGAIN) {
			if (t->eof)
				nbd__read_cb(&c->h.stream, UV_EOF, &b);
			break;
		}
		if (n == GNUTLS_E_INTERRUPTED)
			continue;
		if (n == 0) {              /* close_notify */
			nbd__read_cb(&c->h.stream, UV_EOF, &b);
			break;
		}
		if (n < 0) {
			if (n == GNUTLS_E_PREMATURE_TERMINATION || !gnutls_error_is_fatal((int)n)) {
				if (n == GNUTLS_E_PREMATURE_TERMINATION) {
					nbd__read_cb(&c->h.stream, UV_EOF, &b);
					break;
				}
				continue;
			}
			tls_fail(c, "TLS", (int)n);
			break;
		}
		nbd__read_cb(&c->h.stream, n, &b);
	}
}

static void tls_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
	struct nbd_conn *c = st->data;
	struct nbd_tls_conn *t = c->tls;

	(void)buf;
	if (nread < 0) {
		if (nread != UV_EOF) {
			nbd__conn_close(c, uv_strerror((int)nread));
			return;
		}
		t->eof = true;
		uv_read_stop(st);
	} else {
		t->in_len += (size_t)nread;
	}
	tls_pump(c);
}

static void idle_cb(uv_idle_t *h)
{
	struct nbd_conn *c = h->data;

	uv_idle_stop(h);
	tls_pump(c);
}

void nbd__conn_read_start(struct nbd_conn *c)
{
	struct nbd_tls_conn *t = c->tls;

	if (!t) {
		uv_read_start(&c->h.stream, nbd__alloc_cb, nbd__read_cb);
		return;
	}
	if (!t->eof)
		uv_read_start(&c->h.stream, tls_alloc_cb, tls_read_cb);
	/* records GnuTLS or our buffer hold arrive with no socket event */
	uv_idle_start(&t->idle, idle_cb);
}

/* ---- connection life ---- */

int nbd__tls_start(struct nbd_conn *c)
{
	struct nbd_tls *cfg = c->s->tls;
	struct nbd_tls_conn *t;
	size_t left = c->rlen - c->rpos;
	int rc;

	t = calloc(1, sizeof(*t));
	if (!t || !(t->in = malloc(TLS_IN_SIZE))) {
		free(t);
		return -ENOMEM;
	}
	c->tls = t;
	rc = uv_idle_init(c->s->loop, &t->idle);
	if (rc < 0)
		return rc;
	t->idle.data = c;
	t->idle_inited = true;
	c->handles_open++;
	if ((rc = gnutls_init(&t->session, GNUTLS_SERVER | GNUTLS_NONBLOCK)) < 0) {
		t->session = NULL;
		return -ENOMEM;
	}
	if ((rc = gnutls_priority_set(t->session, cfg->prio)) < 0)
		return -EINVAL;
	if (cfg->x509 &&
	    gnutls_credentials_set(t->session, GNUTLS_CRD_CERTIFICATE, cfg->x509) < 0)
		return -EINVAL;
	if (cfg->psk && gnutls_credentials_set(t->session, GNUTLS_CRD_PSK, cfg->psk) < 0)
		return -EINVAL;
	if (cfg->verify_peer) {
		gnutls_certificate_server_set_request(t->session, GNUTLS_CERT_REQUIRE);
		gnutls_session_set_verify_cert(t->session, NULL, 0);
	}
	gnutls_transport_set_ptr(t->session, c);
	gnutls_transport_set_push_function(t->session, tls_push);
	gnutls_transport_set_pull_function(t->session, tls_pull);
	/* a client that sent its ClientHello early: those bytes are ciphertext */
	if (left > TLS_IN_SIZE)
		return -EPROTO;
	memcpy(t->in, c->rbuf + c->rpos, left);
	t->in_len = left;
	c->rpos = c->rlen = 0;
	uv_read_stop(&c->h.stream);
	if (!c->paused)
		nbd__conn_read_start(c);
	return 0;
}

bool nbd__tls_active(const struct nbd_conn *c)
{
	return c->tls != NULL;
}

bool nbd__tls_bye(struct nbd_conn *c)
{
	struct nbd_tls_conn *t = c->tls;
	struct tls_out *o;

	if (!t || !t->hs_done || t->bye_sent || c->handle_closing)
		return false;
	t->bye_sent = true;
	o = out_new(c, 64);
	if (!o)
		return false;
	t->out = o;
	gnutls_bye(t->session, GNUTLS_SHUT_WR);
	t->out = NULL;
	if (o->len == 0 || out_send(c, o) < 0) {
		out_free(o);
		return false;
	}
	o->tracked = true;
	c->writes_pending++;
	return true;
}

void nbd__tls_close(struct nbd_conn *c, uv_close_cb cb)
{
	struct nbd_tls_conn *t = c->tls;

	if (t && t->idle_inited) {
		t->idle_inited = false;
		uv_close((uv_handle_t *)&t->idle, cb);
	}
}

void nbd__tls_free(struct nbd_conn *c)
{
	struct nbd_tls_conn *t = c->tls;

	if (!t)
		return;
	if (t->session)
		gnutls_deinit(t->session);
	free(t->in);
	free(t);
	c->tls = NULL;
}
