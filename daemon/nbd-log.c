/* SPDX-License-Identifier: MIT */
/*
 * daemon/nbd-log.c - the connection lines: who connected (TCP address and
 * port, or a unix socket peer's pid and uid from SO_PEERCRED), which export
 * it chose and what it negotiated, and when it went away.  One INFO line at
 * the end of the handshake and one at the close, so an operator can tell
 * which client holds an export.  It reads socket metadata only; it must
 * never fail or slow a connection.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon/nbd-internal.h"

static void peer_name(struct nbd_conn *c)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	uv_os_fd_t fd;

	if (c->h.handle.type == UV_TCP) {
		if (uv_tcp_getpeername(&c->h.tcp, (struct sockaddr *)&ss, &len) < 0) {
			snprintf(c->peer, sizeof(c->peer), "tcp:?");
			return;
		}
		if (ss.ss_family == AF_INET6) {
			const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;

			uv_ip6_name(a, host, sizeof(host));
			snprintf(c->peer, sizeof(c->peer), "[%s]:%u", host, ntohs(a->sin6_port));
		} else {
			const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;

			uv_ip4_name(a, host, sizeof(host));
			snprintf(c->peer, sizeof(c->peer), "%s:%u", host, ntohs(a->sin_port));
		}
		return;
	}
	{
		struct ucred cred;
		socklen_t cl = sizeof(cred);

		if (uv_fileno(&c->h.handle, &fd) == 0 &&
		    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0)
			snprintf(c->peer, sizeof(c->peer), "unix pid %ld uid %lu",
				 (long)cred.pid, (unsigned long)cred.uid);
		else
			snprintf(c->peer, sizeof(c->peer), "unix");
	}
}

void nbd__log_conn_open(struct nbd_conn *c)
{
	peer_name(c);
	nbd__log(c->s, TIER_LOG_INFO, "nbd: connection %llu from %s: export '%s'%s%s%s%s",
		 (unsigned long long)c->id, c->peer, c->exp ? c->exp->name : "?",
		 c->exp && c->exp->read_only ? " (read-only)" : "",
		 c->structured ? ", structured replies" : "",
		 c->meta_alloc && c->meta_exp == c->exp ? ", base:allocation" : "",
		 nbd__tls_active(c) ? ", TLS" : "");
}

void nbd__log_conn_closed(struct nbd_conn *c)
{
	if (!c->exp)
		return;    /* never served: the handshake's own lines tell why */
	nbd__log(c->s, TIER_LOG_INFO, "nbd: connection %llu from %s closed (export '%s')",
		 (unsigned long long)c->id, c->peer, c->exp->name);
}
