/* SPDX-License-Identifier: MIT */
/*
 * admin.c - the admin socket's transport: a unix socket (mode 0600 from the
 * start, owner or root only) on the daemon's loop.  Two framings, told apart
 * per command: tierctl's (one command per line, one JSON answer line per
 * command, in order) and the ceph CLI's (`ceph daemon PATH ...`: a JSON
 * command ended by NUL, answered by a 4-byte big-endian length and the JSON,
 * then the connection closes).  It decides who may connect, how a
 * stale socket is replaced and how connections end (idle or not reading its
 * answers for the client timeout: closed; answers queued past
 * ADMIN_MAX_QUEUED: its commands are not read until they drain; at most
 * ADMIN_MAX_CONNS at once); the commands live in admin-cmd.c.  It must never block the loop or remove a socket file that a
 * newer daemon created.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "daemon/admin-internal.h"
#include "daemon/log.h"

struct admin_conn {
	uv_pipe_t pipe;
	uv_timer_t timer;        /* idle, or answers not read: closed */
	struct tierd_admin *a;
	struct admin_conn *next, *prev;
	char buf[ADMIN_MAX_LINE];
	size_t len;
	unsigned handles;        /* open: pipe and timer */
	bool close_after_write, paused;
	struct ucred cred;       /* the peer (SO_PEERCRED), for the audit lines */
};

static void on_rate_timer(uv_timer_t *t)
{
	tierd_admin_sample_rate(t->data);
}

/* ---- connections ---- */

struct wreq {
	uv_write_t req;
	struct admin_conn *conn;
	char *data;
};

static void on_handle_closed(uv_handle_t *h)
{
	struct tierd_admin *a = h->data;

	if (h != (uv_handle_t *)&a->server && h != (uv_handle_t *)&a->timer)
		free(h);   /* a connection: the uv_pipe_t is its first member */
	if (--a->open_handles == 0) {
		free(a->path);
		free(a);
	}
}

static void conn_handle_closed(uv_handle_t *h)
{
	struct admin_conn *conn = h->data;
	struct tierd_admin *a = conn->a;

	if (--conn->handles)
		return;
	free(conn);
	if (--a->open_handles == 0) {
		free(a->path);
		free(a);
	}
}

static void conn_close(struct admin_conn *conn)
{
	struct tierd_admin *a = conn->a;

	if (uv_is_closing((uv_handle_t *)&conn->pipe))
		return;
	if (conn->prev)
		conn->prev->next = conn->next;
	else
		a->conns = conn->next;
	if (conn->next)
		conn->next->prev = conn->prev;
	a->n_conns--;
	uv_close((uv_handle_t *)&conn->timer, conn_handle_closed);
	uv_close((uv_handle_t *)&conn->pipe, conn_handle_closed);
}

static void on_idle(uv_timer_t *t)
{
	conn_close(t->data);
}

/* Something happened on the connection: its deadline starts again. */
static void conn_touch(struct admin_conn *conn)
{
	uv_timer_start(&conn->timer, on_idle, conn->a->timeout_ms, 0);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void conn_run_lines(struct admin_conn *conn);

static void on_written(uv_write_t *req, int status)
{
	struct wreq *w = (struct wreq *)req;
	struct admin_conn *conn = w->conn;

	free(w->data);
	free(w);
	if (status == UV_ECANCELED)
		return;
	if (status < 0 || conn->close_after_write) {
		conn_close(conn);
		return;
	}
	conn_touch(conn);
	/* answers read again: take commands again */
	if (conn->paused &&
	    uv_stream_get_write_queue_size((uv_stream_t *)&conn->pipe) <= ADMIN_MAX_QUEUED / 2) {
		conn->paused = false;
		conn_run_lines(conn);
		if (!conn->paused && !conn->close_after_write &&
		    !uv_is_closing((uv_handle_t *)&conn->pipe) &&
		    uv_read_start((uv_stream_t *)&conn->pipe, on_alloc, on_read) < 0)
			conn_close(conn);
	}
}

/*
 * Send answer (consumed): one line of JSON for tierctl's protocol; for the
 * ceph protocol a 4-byte big-endian length, then the JSON, then the
 * connection closes (as Ceph's admin socket does).
 */
static void conn_answer(struct admin_conn *conn, json_t *answer, bool ceph, bool pretty)
{
	size_t flags = TIERD_JSON_FLAGS | (pretty ? JSON_INDENT(4) : 0);
	struct wreq *w = NULL;
	char *text = answer ? json_dumps(answer, flags) : NULL;
	size_t tlen = text ? strlen(text) : 0, hlen = ceph ? 4 : 0;
	uv_buf_t buf;

	json_decref(answer);
	if (!text || !(w = calloc(1, sizeof(*w))) || !(w->data = malloc(hlen + tlen + 1))) {
		free(text);
		free(w);
		conn_close(conn);
		return;
	}
	if (ceph) {
		uint32_t be = htonl((uint32_t)tlen);
		memcpy(w->data, &be, 4);
		conn->close_after_write = true;
	}
	memcpy(w->data + hlen, text, tlen);
	if (!ceph)
		w->data[tlen++] = '\n';
	free(text);
	w->conn = conn;
	buf = uv_buf_init(w->data, (unsigned)(hlen + tlen));
	if (uv_write(&w->req, (uv_stream_t *)&conn->pipe, &buf, 1, on_written) < 0) {
		free(w->data);
		free(w);
		conn_close(conn);
		return;
	}
	/* a client that does not read its answers: stop reading its commands */
	if (!conn->paused &&
	    uv_stream_get_write_queue_size((uv_stream_t *)&conn->pipe) > ADMIN_MAX_QUEUED) {
		conn->paused = true;
		uv_read_stop((uv_stream_t *)&conn->pipe);
	}
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct admin_conn *conn = (struct admin_conn *)h;

	(void)suggested;
	*buf = uv_buf_init(conn->buf + conn->len, (unsigned)(sizeof(conn->buf) - conn->len));
}

/* Whether a command changes state (audited): a line by its words, a ceph
 * command by its "prefix". */
static bool audit_wanted(const char *cmd, size_t len, bool ceph)
{
	json_t *j;
	bool r;

	if (!ceph)
		return tierd_audit_wanted(cmd);
	j = json_loadb(cmd, len, 0, NULL);
	r = json_is_string(json_object_get(j, "prefix")) &&
	    tierd_audit_wanted(json_string_value(json_object_get(j, "prefix")));
	json_decref(j);
	return r;
}

/* The end of the first command buffered: a newline, or the NUL that ends a
 * ceph command; NULL while none is complete. */
static char *command_end(struct admin_conn *conn)
{
	for (size_t i = 0; i < conn->len; i++)
		if (conn->buf[i] == '\n' || conn->buf[i] == '\0')
			return conn->buf + i;
	return NULL;
}

/*
 * Run the complete commands buffered, as far as the answers drain.  A
 * command that ends with NUL or starts with '{' is the ceph CLI's (`ceph
 * daemon PATH ...`: JSON, answered length-prefixed); any other is a tierctl
 * line.
 */
static void conn_run_lines(struct admin_conn *conn)
{
	uv_stream_t *s = (uv_stream_t *)&conn->pipe;
	char *end;

	while (!uv_is_closing((uv_handle_t *)s) && !conn->paused && !conn->close_after_write &&
	       (end = command_end(conn)) != NULL) {
		size_t len = (size_t)(end - conn->buf);
		bool ceph = *end == '\0' || (len && conn->buf[0] == '{'), pretty = false;
		char copy[ADMIN_MAX_LINE + 1];
		json_t *answer;
		bool audit;

		conn_touch(conn);
		memcpy(copy, conn->buf, len);
		copy[len] = '\0';
		audit = conn->a->hooks.log && audit_wanted(copy, len, ceph);
		if (ceph)
			answer = tierd_admin_run_ceph(conn->a, conn->buf, len, &pretty);
		else
			answer = tierd_admin_run_line(conn->a, conn->buf, len);
		if (audit) {
			char *text = answer ? json_dumps(answer, TIERD_JSON_FLAGS) : NULL;
			tierd_audit(conn->a->hooks.log, conn->a->hooks.arg, conn->cred.uid,
				    conn->cred.pid, copy, text ? text : "", text ? strlen(text) : 0);
			free(text);
		}
		memmove(conn->buf, end + 1, conn->len - len - 1);
		conn->len -= len + 1;
		if (ceph)
			uv_read_stop(s);
		conn_answer(conn, answer, ceph, pretty);
	}
	if (conn->len == sizeof(conn->buf) && !conn->paused && !conn->close_after_write &&
	    !uv_is_closing((uv_handle_t *)s)) {
		conn->close_after_write = true;
		uv_read_stop(s);
		conn_answer(conn, tierd_admin_error("command line too long (allowed: %d bytes)",
						    ADMIN_MAX_LINE - 1), false, false);
	}
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct admin_conn *conn = (struct admin_conn *)s;

	(void)buf;
	if (nread < 0) {
		conn_close(conn);
		return;
	}
	conn->len += (size_t)nread;
	conn_run_lines(conn);
}

/* Only the daemon's own user or root may talk to it, whatever the file mode. */
static bool peer_allowed(uv_pipe_t *p, struct ucred *cred)
{
	socklen_t len = sizeof(*cred);
	uv_os_fd_t fd;

	if (uv_fileno((uv_handle_t *)p, &fd) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &len) < 0)
		return false;
	return cred->uid == 0 || cred->uid == geteuid();
}

static void on_connection(uv_stream_t *server, int status)
{
	struct tierd_admin *a = server->data;
	struct admin_conn *conn;

	if (status < 0)
		return;
	conn = calloc(1, sizeof(*conn));
	if (!conn)
		return;
	conn->a = a;
	uv_pipe_init(a->loop, &conn->pipe, 0);
	conn->pipe.data = a;
	a->open_handles++;
	if (uv_accept(server, (uv_stream_t *)&conn->pipe) < 0 || !peer_allowed(&conn->pipe, &conn->cred) ||
	    a->n_conns >= ADMIN_MAX_CONNS) {
		uv_close((uv_handle_t *)&conn->pipe, on_handle_closed);
		return;
	}
	conn->pipe.data = conn;
	uv_timer_init(a->loop, &conn->timer);
	conn->timer.data = conn;
	conn->handles = 2;
	conn->next = a->conns;
	if (a->conns)
		a->conns->prev = conn;
	a->conns = conn;
	a->n_conns++;
	conn_touch(conn);
	if (uv_read_start((uv_stream_t *)&conn->pipe, on_alloc, on_read) < 0)
		conn_close(conn);
}

/* ---- listener ---- */

static int fill_addr(struct sockaddr_un *sa, const char *path)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	strcpy(sa->sun_path, path);
	return 0;
}

/* A socket file nobody answers on is stale; a live one means another daemon. */
static int check_existing(const char *path)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd, r = 0;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	if (fill_addr(&sa, path) < 0)
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		r = -EADDRINUSE;
	close(fd);
	return r;
}

/* Bind under a temporary name, chmod 0600, then rename over path: no window
 * in which the socket exists with the umask's mode. */
static int bind_socket(const char *path, int *fd_out, ino_t *ino)
{
	struct sockaddr_un sa;
	char tmp[sizeof(sa.sun_path) + 32];
	struct stat st;
	int fd = -1, r;

	*fd_out = -1;
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
	r = fill_addr(&sa, tmp);
	if (r < 0)
		goto out;
	unlink(tmp);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		goto out;
	}
	if (chmod(tmp, 0600) < 0 || listen(fd, 16) < 0 || rename(tmp, path) < 0 ||
	    stat(path, &st) < 0) {
		r = -errno;
		unlink(tmp);
		goto out;
	}
	*ino = st.st_ino;
	*fd_out = fd;
	fd = -1;
out:
	if (fd >= 0)
		close(fd);
	return r;
}

int tierd_admin_start(uv_loop_t *loop, const char *path, const struct tierd_admin_hooks *hooks,
		      struct tierd_admin **out)
{
	struct tierd_admin *a = NULL;
	int fd = -1, r;

	*out = NULL;
	if (!loop || !path || !hooks)
		return -EINVAL;
	r = check_existing(path);
	if (r < 0)
		return r;
	a = calloc(1, sizeof(*a));
	if (!a || !(a->path = strdup(path))) {
		r = -ENOMEM;
		goto out;
	}
	a->loop = loop;
	a->hooks = *hooks;
	a->timeout_ms = ADMIN_DEFAULT_TIMEOUT_MS;
	r = bind_socket(path, &fd, &a->ino);
	if (r < 0)
		goto out;
	uv_pipe_init(loop, &a->server, 0);
	a->server.data = a;
	a->open_handles = 1;
	r = uv_pipe_open(&a->server, fd);
	if (r < 0)
		close(fd);   /* not adopted by the handle */
	else
		r = uv_listen((uv_stream_t *)&a->server, 16, on_connection);
	if (r < 0) {
		unlink(path);
		uv_close((uv_handle_t *)&a->server, on_handle_closed);   /* frees a */
		return r;
	}
	uv_timer_init(loop, &a->timer);
	a->timer.data = a;
	a->open_handles++;
	uv_timer_start(&a->timer, on_rate_timer, 1000, 1000);
	uv_unref((uv_handle_t *)&a->timer);
	*out = a;
	return 0;
out:
	if (a)
		free(a->path);
	free(a);
	return r;
}

void tierd_admin_set_timeout(struct tierd_admin *a, uint64_t ms)
{
	if (a)
		a->timeout_ms = ms ? ms : ADMIN_DEFAULT_TIMEOUT_MS;
}

void tierd_admin_stop(struct tierd_admin *a)
{
	struct stat st;

	if (!a)
		return;
	/* Unlink only our own socket, not a successor's. */
	if (stat(a->path, &st) == 0 && st.st_ino == a->ino)
		unlink(a->path);
	while (a->conns)
		conn_close(a->conns);
	uv_timer_stop(&a->timer);
	uv_close((uv_handle_t *)&a->timer, on_handle_closed);
	uv_close((uv_handle_t *)&a->server, on_handle_closed);
}
