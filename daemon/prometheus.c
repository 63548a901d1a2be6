/* SPDX-License-Identifier: MIT */
/*
 * daemon/prometheus.c - the Prometheus text endpoint.  It answers every
 * request on its port with one HTTP/1.0 response holding the engine's
 * counters, gauges and latency quantiles, then closes the connection.  It
 * reads the engine's stats only; it must never change engine state or block
 * the loop (requests are small and bounded; a scrape not done within the
 * client timeout is cut off, and at most PROM_MAX_CONNS are open at once).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/prometheus.h"

#define PROM_REQ_MAX 8192
#define PROM_MAX_CONNS 64                /* scrapes at once; more are closed */
#define PROM_DEFAULT_TIMEOUT_MS 10000u   /* a scrape must be done by then */

struct tierd_prom {
	uv_loop_t *loop;
	uv_tcp_t listener;
	struct tier_engine *(*engine)(void *arg);
	void *arg;
	struct prom_conn *conns;     /* open scrapes, closed at stop */
	size_t n_conns;
	uint64_t timeout_ms;
	int stopping;
	int listener_open;
};

struct prom_conn {
	uv_tcp_t h;
	uv_timer_t timer;            /* request read and response written by then */
	unsigned handles;
	struct tierd_prom *p;
	struct prom_conn *prev, *next;
	uv_write_t wr;
	char *resp;
	size_t got;
	int answered;
	char req[PROM_REQ_MAX];
};

char *tierd_prom_render(struct tier_engine *e, size_t *len)
{
	static const char *const kinds[TIER_LAT_KINDS] = { "read", "write", "other" };
	static const double qs[] = { 0.5, 0.99, 0.999 };
	struct tier_stats st;
	char *out = NULL;
	FILE *b = open_memstream(&out, len);

	if (!b)
		return NULL;
	tier_engine_get_stats(e, &st);
#define PROM_COUNTER(n)                                                          \
	fprintf(b, "# TYPE tierd_" #n "_total counter\ntierd_" #n "_total %llu\n",  \
		(unsigned long long)st.n);
#define PROM_GAUGE(n)                                                            \
	fprintf(b, "# TYPE tierd_" #n " gauge\ntierd_" #n " %llu\n",              \
		(unsigned long long)st.n);
	TIER_COUNTERS(PROM_COUNTER)
	TIER_GAUGES(PROM_GAUGE)
#undef PROM_COUNTER
#undef PROM_GAUGE
	fprintf(b, "# TYPE tierd_latency_seconds summary\n");
	for (int k = 0; k < TIER_LAT_KINDS; k++) {
		for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++)
			fprintf(b, "tierd_latency_seconds{op=\"%s\",quantile=\"%g\"} %.6f\n",
				kinds[k], qs[i],
				(double)tier_lat_quantile(&st.lat[k], qs[i]) / 1e6);
		fprintf(b, "tierd_latency_seconds_sum{op=\"%s\"} %.6f\n", kinds[k],
			(double)st.lat[k].sum_us / 1e6);
		fprintf(b, "tierd_latency_seconds_count{op=\"%s\"} %llu\n", kinds[k],
			(unsigned long long)st.lat[k].count);
	}
	if (ferror(b) | fclose(b)) {
		free(out);
		return NULL;
	}
	return out;
}

static void maybe_free(struct tierd_prom *p)
{
	if (p->stopping && !p->listener_open && !p->conns)
		free(p);
}

static void conn_closed(uv_handle_t *h)
{
	struct prom_conn *c = h->data;
	struct tierd_prom *p = c->p;

	if (--c->handles)
		return;
	p->n_conns--;
	if (c->prev)
		c->prev->next = c->next;
	else
		p->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c->resp);
	free(c);
	maybe_free(p);
}

static void conn_close(struct prom_conn *c)
{
	if (uv_is_closing((uv_handle_t *)&c->h))
		return;
	if (c->handles == 2)
		uv_close((uv_handle_t *)&c->timer, conn_closed);
	uv_close((uv_handle_t *)&c->h, conn_closed);
}

static void on_deadline(uv_timer_t *t)
{
	conn_close(t->data);
}

static void on_written(uv_write_t *wr, int status)
{
	(void)status;
	conn_close(wr->data);
}

static void answer(struct prom_conn *c)
{
	struct tier_engine *e = c->p->engine(c->p->arg);
	char *body = NULL, head[256];
	size_t blen = 0;
	int hlen;
	uv_buf_t buf;

	c->answered = 1;
	uv_read_stop((uv_stream_t *)&c->h);
	body = e ? tierd_prom_render(e, &blen) : NULL;
	if (!body) {
		hlen = snprintf(head, sizeof(head),
				"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
		blen = 0;
	} else {
		hlen = snprintf(head, sizeof(head),
				"HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
				"Content-Length: %zu\r\nConnection: close\r\n\r\n", blen);
	}
	c->resp = malloc((size_t)hlen + blen);
	if (!c->resp) {
		free(body);
		conn_close(c);
		return;
	}
	memcpy(c->resp, head, (size_t)hlen);
	if (blen)
		memcpy(c->resp + hlen, body, blen);
	free(body);
	buf = uv_buf_init(c->resp, (unsigned)((size_t)hlen + blen));
	c->wr.data = c;
	if (uv_write(&c->wr, (uv_stream_t *)&c->h, &buf, 1, on_written) < 0)
		conn_close(c);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct prom_conn *c = h->data;
	(void)hint;

	*buf = uv_buf_init(c->req + c->got, (unsigned)(sizeof(c->req) - 1 - c->got));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct prom_conn *c = s->data;
	(void)buf;

	if (n < 0) {
		conn_close(c);
		return;
	}
	c->got += (size_t)n;
	c->req[c->got] = '\0';
	/* the end of the request head, or a head too large to be a scrape */
	if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n"))
		answer(c);
	else if (c->got >= sizeof(c->req) - 1)
		conn_close(c);
}

static void on_connection(uv_stream_t *server, int status)
{
	struct tierd_prom *p = server->data;
	struct prom_conn *c;

	if (status < 0 || p->stopping)
		return;
	c = calloc(1, sizeof(*c));
	if (!c)
		return;
	c->p = p;
	uv_tcp_init(p->loop, &c->h);
	c->h.data = c;
	c->handles = 1;
	c->next = p->conns;
	if (p->conns)
		p->conns->prev = c;
	p->conns = c;
	p->n_conns++;
	if (uv_accept(server, (uv_stream_t *)&c->h) < 0 || p->n_conns > PROM_MAX_CONNS) {
		conn_close(c);
		return;
	}
	uv_timer_init(p->loop, &c->timer);
	c->timer.data = c;
	c->handles = 2;
	uv_timer_start(&c->timer, on_deadline, p->timeout_ms, 0);
	if (uv_read_start((uv_stream_t *)&c->h, on_alloc, on_read) < 0)
		conn_close(c);
}

static void listener_closed(uv_handle_t *h);

static int parse_addr(const char *addr, struct sockaddr_storage *ss)
{
	char host[256];
	const char *colon = strrchr(addr, ':');
	char *end;
	long port;
	size_t hl;

	if (!colon)
		return -EINVAL;
	port = strtol(colon + 1, &end, 10);
	if (*end || port <= 0 || port > 65535)
		return -EINVAL;
	hl = (size_t)(colon - addr);
	if (hl >= 2 && addr[0] == '[' && addr[hl - 1] == ']') {
		addr++;
		hl -= 2;
	}
	if (hl == 0 || hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, addr, hl);
	host[hl] = '\0';
	if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss) == 0 ||
	    uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss) == 0)
		return 0;
	return -EINVAL;
}

int tierd_prom_start(uv_loop_t *loop, const char *addr,
		     struct tier_engine *(*engine)(void *arg), void *arg,
		     struct tierd_prom **out)
{
	struct sockaddr_storage ss;
	struct tierd_prom *p = NULL;
	int rc;

	*out = NULL;
	memset(&ss, 0, sizeof(ss));
	rc = parse_addr(addr, &ss);
	if (rc < 0)
		return rc;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->loop = loop;
	p->timeout_ms = PROM_DEFAULT_TIMEOUT_MS;
	p->engine = engine;
	p->arg = arg;
	uv_tcp_init(loop, &p->listener);
	p->listener.data = p;
	p->listener_open = 1;
	rc = uv_tcp_bind(&p->listener, (const struct sockaddr *)&ss, 0);
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&p->listener, 16, on_connection);
	if (rc < 0) {
		tierd_prom_stop(p);
		return rc;
	}
	*out = p;
	return 0;
}

static void listener_closed(uv_handle_t *h)
{
	struct tierd_prom *p = h->data;

	p->listener_open = 0;
	maybe_free(p);
}

void tierd_prom_set_timeout(struct tierd_prom *p, uint64_t ms)
{
	if (p)
		p->timeout_ms = ms ? ms : PROM_DEFAULT_TIMEOUT_MS;
}

void tierd_prom_stop(struct tierd_prom *p)
{
	if (!p)
		return;
	p->stopping = 1;
	for (struct prom_conn *c = p->conns; c; c = c->next)
		conn_close(c);
	uv_close((uv_handle_t *)&p->listener, listener_closed);
}
