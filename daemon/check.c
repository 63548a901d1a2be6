/* SPDX-License-Identifier: MIT */
/*
 * daemon/check.c - the probes behind `tierd --check`: once the file parses,
 * look at what the start would need from this machine, as the user running
 * the check: the data directory (local backend), the directories of the unix
 * sockets, whether each listen/admin/Prometheus address can be bound, the TLS
 * files, and for rados the Ceph config and a keyring.  It decides what is an
 * error (a start would fail there) and what is a note (a stale socket that
 * the start replaces; a tierd already running on this config, so a check
 * before a reload passes).  It must never change anything: no directory is
 * created, no socket file replaced or unlinked, a live socket is only
 * connected to, a TCP address is bound for the probe and closed at once.
 */
#include <config.h>   /* generated: HAVE_RADOS */

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/sysmacros.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <gnutls/gnutls.h>
#if HAVE_RADOS
#include <rados/librados.h>
#endif

#include "daemon/check.h"
#include "daemon/nbd.h"

/* "PATH.PID.tmp": the listeners bind under this name, then rename it */
#define TMP_SUFFIX_MAX (sizeof(".4194304.tmp") - 1)

struct probe {
	FILE *out, *err;
	int errors;
	long tierd_pid;        /* a tierd already running on this config, or 0 */
};

static void say(struct probe *p, const char *kind, const char *what, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void say(struct probe *p, const char *kind, const char *what, const char *fmt, ...)
{
	bool bad = !strcmp(kind, "error");
	FILE *f = bad ? p->err : p->out;
	va_list ap;

	if (bad)
		p->errors++;
	if (bad)
		fprintf(f, "tierd: check: %s: ", what);
	else
		fprintf(f, "check: %s: %s: ", kind, what);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
}

#define OK(p, w, ...) say(p, "ok", w, __VA_ARGS__)
#define NOTE(p, w, ...) say(p, "note", w, __VA_ARGS__)
#define BAD(p, w, ...) say(p, "error", w, __VA_ARGS__)

/* 0 if path is a directory this process may create files in, else -errno. */
static int dir_writable(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (faccessat(AT_FDCWD, path, W_OK | X_OK, AT_EACCESS) < 0)
		return -errno;
	return 0;
}

static void parent_of(const char *path, char *out, size_t cap)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(out, cap, ".");
	else if (slash == path)
		snprintf(out, cap, "/");
	else
		snprintf(out, cap, "%.*s", (int)(slash - path), path);
}

/* 0 if path opens for reading, else -errno. */
static int readable(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

/* The pid and command name of the process at the other end of a unix socket. */
static long peer_of(int fd, char *comm, size_t cap)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	char path[64];
	FILE *f;

	snprintf(comm, cap, "unknown");
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%ld/comm", (long)cr.pid);
	f = fopen(path, "re");
	if (f) {
		if (fgets(comm, (int)cap, f))
			comm[strcspn(comm, "\n")] = 0;
		fclose(f);
	}
	return (long)cr.pid;
}

/* ---- [local] data_dir ---- */

static void probe_data_dir(struct probe *p, const char *dir)
{
	char path[PATH_MAX], parent[PATH_MAX], holder[32] = "";
	struct stat st;
	ssize_t n;
	int rc, fd;

	if (stat(dir, &st) < 0) {
		if (errno != ENOENT) {
			BAD(p, "data_dir", "%s: %s", dir, strerror(errno));
			return;
		}
		parent_of(dir, parent, sizeof(parent));
		rc = dir_writable(parent);
		if (rc < 0)
			BAD(p, "data_dir", "%s does not exist and cannot be created: its parent "
			    "%s: %s", dir, parent, strerror(-rc));
		else
			OK(p, "data_dir", "%s does not exist yet; the start creates it (0700)", dir);
		return;
	}
	rc = dir_writable(dir);
	if (rc < 0) {
		BAD(p, "data_dir", "%s: %s (the pools live in it: it must be a directory "
		    "this user can write)", dir, strerror(-rc));
		return;
	}
	snprintf(path, sizeof(path), "%s/tierd.lock", dir);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			BAD(p, "data_dir", "lock file %s: %s", path, strerror(errno));
		else
			OK(p, "data_dir", "%s (writable)", dir);
		return;
	}
	/* held only for the probe: a tierd starting this very instant would see it busy */
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		n = pread(fd, holder, sizeof(holder) - 1, 0);
		holder[n > 0 ? n : 0] = 0;
		holder[strcspn(holder, "\n")] = 0;
		p->tierd_pid = strtol(holder, NULL, 10);
		NOTE(p, "data_dir", "%s is in use by a running tierd (pid %s): a second start "
		     "would be refused while it runs", dir, holder[0] ? holder : "unknown");
		holder[strcspn(holder, "\n")] = 0;
	} else {
		flock(fd, LOCK_UN);
		OK(p, "data_dir", "%s (writable)", dir);
	}
	close(fd);
}

/* ---- [local] base_dir, cache_dir: each pool's directory and device ---- */

struct fs_info {
	dev_t dev;
	char type[32], source[256], mnt[PATH_MAX];
};

/*
 * The filesystem path is on (the deepest mount of /proc/self/mountinfo with
 * its device): path, or the nearest ancestor that exists (created at start).
 */
static int fs_of(const char *path, char *at, size_t atlen, struct fs_info *fi)
{
	char line[8192], mnt[PATH_MAX], type[32], source[256];
	unsigned maj, mnr;
	struct stat st;
	size_t best = 0;
	FILE *f;

	snprintf(at, atlen, "%s", path);
	while (stat(at, &st) < 0) {
		char up[PATH_MAX];

		if (errno != ENOENT || !strcmp(at, "/") || !strcmp(at, "."))
			return -errno;
		parent_of(at, up, sizeof(up));
		snprintf(at, atlen, "%s", up);
	}
	memset(fi, 0, sizeof(*fi));
	fi->dev = st.st_dev;
	snprintf(fi->type, sizeof(fi->type), "?");
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		const char *dash = strstr(line, " - ");
		size_t ml;

		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT ... - TYPE SOURCE OPTIONS */
		if (!dash || sscanf(line, "%*u %*u %u:%u %*s %4095s", &maj, &mnr, mnt) != 3 ||
		    sscanf(dash + 3, "%31s %255s", type, source) != 2 ||
		    makedev(maj, mnr) != st.st_dev)
			continue;
		ml = strlen(mnt);
		if (ml >= best) {
			best = ml;
			snprintf(fi->type, sizeof(fi->type), "%s", type);
			snprintf(fi->source, sizeof(fi->source), "%s", source);
			snprintf(fi->mnt, sizeof(fi->mnt), "%s", mnt);
		}
	}
	fclose(f);
	return 0;
}

static void probe_pools(struct probe *p, const struct tierd_config *c)
{
	static const char *const what[2] = { "base_dir", "cache_dir" };
	static const char *const pool[2] = { "base", "cache" };
	const struct tier_devmodel_params *m[2] = { &c->base_model, &c->cache_model };
	struct fs_info fi[2];
	char dir[PATH_MAX], at[PATH_MAX];
	bool known[2] = { false, false };
	int rc;

	for (int i = 0; i < 2; i++) {
		tierd_config_pool_dir(c, i == 1, dir, sizeof(dir));
		rc = fs_of(dir, at, sizeof(at), &fi[i]);
		if (rc < 0) {
			BAD(p, what[i], "%s pool %s: %s", pool[i], dir, strerror(-rc));
			continue;
		}
		rc = dir_writable(at);
		if (rc < 0) {
			BAD(p, what[i], "%s pool %s: %s%s: %s", pool[i], dir, strcmp(at, dir) ?
			    "it does not exist, and cannot be created in " : "", strcmp(at, dir) ?
			    at : "", strerror(-rc));
			continue;
		}
		known[i] = true;
		OK(p, what[i], "%s pool %s%s: %s filesystem on %s (mounted at %s, device %u:%u)%s",
		   pool[i], dir, strcmp(at, dir) ? " (created at start)" : "", fi[i].type,
		   fi[i].source[0] ? fi[i].source : "?", fi[i].mnt[0] ? fi[i].mnt : "?",
		   major(fi[i].dev), minor(fi[i].dev),
		   m[i]->read_latency_us || m[i]->write_latency_us || m[i]->bandwidth ||
		   m[i]->queue_depth ? "; a device model slows it down (its profile and "
		   "overrides: for demos, benchmarks and tests)" : "");
	}
	if (known[0] && known[1] && fi[0].dev == fi[1].dev)
		NOTE(p, "cache_dir", "both pools are on one filesystem (%s, %s): %s", fi[1].type,
		     fi[1].source[0] ? fi[1].source : "?",
		     memcmp(m[0], m[1], sizeof(*m[0])) ? "only the device models make them differ" :
		     "the cache pool is no faster than the base pool, so caching gains nothing; "
		     "put cache_dir on the fast device");
}

/* ---- unix sockets: listeners and the admin socket ---- */

static void probe_unix(struct probe *p, const char *what, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dir[PATH_MAX], comm[64];
	struct stat st;
	long pid;
	int rc, fd;

	if (!path[0] || path[0] != '/') {
		BAD(p, what, "'%s': a unix socket path must be absolute", path);
		return;
	}
	if (strlen(path) + TMP_SUFFIX_MAX >= sizeof(sa.sun_path)) {
		BAD(p, what, "%s: too long for a unix socket (at most %zu characters)", path,
		    sizeof(sa.sun_path) - 1 - TMP_SUFFIX_MAX);
		return;
	}
	parent_of(path, dir, sizeof(dir));
	rc = dir_writable(dir);
	if (rc == -ENOENT) {
		BAD(p, what, "directory %s does not exist (tierd does not create it; the unit's "
		    "RuntimeDirectory= makes /run/tierd, the package's tmpfiles.d entry too)",
		    dir);
		return;
	}
	if (rc < 0) {
		BAD(p, what, "directory %s: %s (the socket is bound there under a temporary "
		    "name, then renamed)", dir, strerror(-rc));
		return;
	}
	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			OK(p, what, "%s (directory writable, name free)", path);
		else
			BAD(p, what, "%s: %s", path, strerror(errno));
		return;
	}
	if (!S_ISSOCK(st.st_mode)) {
		BAD(p, what, "%s exists and is not a socket: tierd will not replace it", path);
		return;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		BAD(p, what, "socket: %s", strerror(errno));
		return;
	}
	if (connect(fd, (const struct sockaddr *)&sa, sizeof(sa)) == 0) {
		pid = peer_of(fd, comm, sizeof(comm));
		if (!strcmp(comm, "tierd")) {
			if (!p->tierd_pid)
				p->tierd_pid = pid;
			NOTE(p, what, "%s is served by a running tierd (pid %ld): a second start "
			     "would be refused while it runs", path, pid);
		} else {
			BAD(p, what, "%s is served by another process (pid %ld, %s): tierd will "
			    "not take it over", path, pid, comm);
		}
	} else if (errno == ECONNREFUSED) {
		NOTE(p, what, "%s is a stale socket (nobody answers): the start replaces it",
		     path);
	} else {
		BAD(p, what, "%s: connect: %s", path, strerror(errno));
	}
	close(fd);
}

/* ---- TCP: HOST:PORT or [IPV6]:PORT, parsed as the listener does (nbd_parse_tcp_addr) ---- */

static void probe_tcp(struct probe *p, const char *what, const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len = 0;
	int fd, one = 1;

	if (nbd_parse_tcp_addr(addr, &ss, &len) < 0) {
		BAD(p, what, "'%s' is not HOST:PORT with a numeric IPv4 address or [IPV6]:PORT "
		    "(names are not resolved), port 0..65535", addr);
		return;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		BAD(p, what, "%s: socket: %s", addr, strerror(errno));
		return;
	}
	/* as libuv binds: SO_REUSEADDR, so TIME_WAIT leftovers do not count */
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)&ss, len) == 0)
		OK(p, what, "%s (bindable)", addr);
	else if (errno == EADDRINUSE && p->tierd_pid)
		NOTE(p, what, "%s is in use, presumably by the running tierd (pid %ld)", addr,
		     p->tierd_pid);
	else if (errno == EADDRINUSE)
		BAD(p, what, "%s is in use by another process", addr);
	else if (errno == EADDRNOTAVAIL)
		BAD(p, what, "%s: no such address on this host", addr);
	else if (errno == EACCES)
		BAD(p, what, "%s: %s (a port below 1024 needs privileges the unit does not "
		    "grant)", addr, strerror(errno));
	else
		BAD(p, what, "%s: %s", addr, strerror(errno));
	close(fd);
}

static void probe_listen(struct probe *p, const char *what, const char *addr)
{
	if (!strncmp(addr, "unix:", 5))
		probe_unix(p, what, addr + 5);
	else
		probe_tcp(p, what, addr);
}

/* ---- TLS ---- */

static void probe_tls(struct probe *p, const struct tierd_config *c)
{
	char cert[PATH_MAX], key[PATH_MAX], ca[PATH_MAX];
	gnutls_certificate_credentials_t x = NULL;
	gnutls_psk_server_credentials_t psk = NULL;
	int rc;

	if (!c->tls) {
		if (c->tls_certificates || c->tls_psk_file)
			NOTE(p, "tls", "tls = off: tls_certificates and tls_psk_file are not used");
		return;
	}
	if (c->tls_certificates) {
		const char *d = c->tls_certificates;

		snprintf(cert, sizeof(cert), "%s/server-cert.pem", d);
		snprintf(key, sizeof(key), "%s/server-key.pem", d);
		snprintf(ca, sizeof(ca), "%s/ca-cert.pem", d);
		if ((rc = readable(cert)) < 0)
			BAD(p, "tls_certificates", "%s: %s", cert, strerror(-rc));
		else if ((rc = readable(key)) < 0)
			BAD(p, "tls_certificates", "%s: %s", key, strerror(-rc));
		else if (gnutls_certificate_allocate_credentials(&x) < 0)
			BAD(p, "tls_certificates", "out of memory");
		else if ((rc = gnutls_certificate_set_x509_key_file(x, cert, key,
								  GNUTLS_X509_FMT_PEM)) < 0)
			BAD(p, "tls_certificates", "%s, %s: %s", cert, key, gnutls_strerror(rc));
		else
			OK(p, "tls_certificates", "%s and %s load", cert, key);
		rc = readable(ca);
		if (rc < 0 && (c->tls_verify_peer || rc != -ENOENT))
			BAD(p, "tls_certificates", "%s: %s%s", ca, strerror(-rc),
			    c->tls_verify_peer ? " (tls_verify_peer needs it)" : "");
		else if (rc == 0 && x && (rc = gnutls_certificate_set_x509_trust_file(
						x, ca, GNUTLS_X509_FMT_PEM)) < 0)
			BAD(p, "tls_certificates", "%s: %s", ca, gnutls_strerror(rc));
		else if (rc >= 0 && x)
			OK(p, "tls_certificates", "%s loads", ca);
		if (x)
			gnutls_certificate_free_credentials(x);
	}
	if (c->tls_psk_file) {
		if ((rc = readable(c->tls_psk_file)) < 0)
			BAD(p, "tls_psk_file", "%s: %s", c->tls_psk_file, strerror(-rc));
		else if (gnutls_psk_allocate_server_credentials(&psk) < 0)
			BAD(p, "tls_psk_file", "out of memory");
		else if ((rc = gnutls_psk_set_server_credentials_file(psk, c->tls_psk_file)) < 0)
			BAD(p, "tls_psk_file", "%s: %s", c->tls_psk_file, gnutls_strerror(rc));
		else
			OK(p, "tls_psk_file", "%s (readable)", c->tls_psk_file);
		if (psk)
			gnutls_psk_free_server_credentials(psk);
	}
}

/* ---- rados: the Ceph config and a keyring, without connecting ---- */

#if HAVE_RADOS
/* One of the comma/space-separated paths in list readable: 0 and which, or -errno. */
static int any_readable(const char *list, char *which, size_t cap)
{
	char buf[2048], *save = NULL, *tok;
	int rc = -ENOENT;

	snprintf(buf, sizeof(buf), "%s", list);
	for (tok = strtok_r(buf, ", ;\t", &save); tok; tok = strtok_r(NULL, ", ;\t", &save)) {
		int r = readable(tok);

		if (r == 0) {
			snprintf(which, cap, "%s", tok);
			return 0;
		}
		if (r != -ENOENT)
			rc = r;
	}
	return rc;
}

static void probe_rados(struct probe *p, const struct tierd_config *c)
{
	const char *cn = c->rados_client_name && c->rados_client_name[0] ?
			 c->rados_client_name : "client.admin";
	char name[128], v[2048] = "", auth[256] = "", which[PATH_MAX];
	rados_t cl = NULL;
	int rc;

	if (strchr(cn, '.'))
		snprintf(name, sizeof(name), "%s", cn);
	else
		snprintf(name, sizeof(name), "client.%s", cn);
	if (c->rados_conf && (rc = readable(c->rados_conf)) < 0) {
		BAD(p, "rados.conf", "%s: %s", c->rados_conf, strerror(-rc));
		return;
	}
	if ((rc = rados_create2(&cl, "ceph", name, 0)) < 0) {
		BAD(p, "rados.client_name", "%s: %s", name, strerror(-rc));
		return;
	}
	rados_conf_set(cl, "log_to_stderr", "false");
	rados_conf_set(cl, "err_to_stderr", "false");
	if ((rc = rados_conf_read_file(cl, c->rados_conf)) < 0) {
		BAD(p, "rados.conf", "%s: %s", c->rados_conf ? c->rados_conf : "(default)",
		    strerror(-rc));
		goto out;
	}
	rados_conf_parse_env(cl, NULL);
	OK(p, "rados.conf", "%s parses", c->rados_conf ? c->rados_conf : "(default)");
	if (rados_conf_get(cl, "mon_host", v, sizeof(v)) < 0 || !v[0])
		BAD(p, "rados.conf", "%s names no mon_host: tierd could not find the cluster",
		    c->rados_conf ? c->rados_conf : "(default)");
	if (rados_conf_get(cl, "auth_client_required", auth, sizeof(auth)) == 0 &&
	    !strcmp(auth, "none")) {
		OK(p, "rados.keyring", "auth_client_required = none: no keyring needed");
		goto out;
	}
	if (rados_conf_get(cl, "key", v, sizeof(v)) == 0 && v[0]) {
		OK(p, "rados.keyring", "the Ceph config holds the key of %s", name);
		goto out;
	}
	if (c->rados_keyring)
		snprintf(v, sizeof(v), "%s", c->rados_keyring);
	else if (rados_conf_get(cl, "keyring", v, sizeof(v)) < 0)
		v[0] = 0;
	rc = any_readable(v, which, sizeof(which));
	if (rc == 0)
		OK(p, "rados.keyring", "%s (readable, for %s)", which, name);
	else
		BAD(p, "rados.keyring", "no readable keyring for %s among %s: %s (make it "
		    "readable by this user, or set [rados] keyring)", name, v[0] ? v : "(none)",
		    strerror(-rc));
out:
	rados_shutdown(cl);
}
#endif

/* ---- socket_group ---- */

static void probe_group(struct probe *p, const char *g)
{
	char *end;
	unsigned long id;

	if (!g || !g[0])
		return;
	if (getgrnam(g)) {
		OK(p, "socket_group", "%s", g);
		return;
	}
	errno = 0;
	id = strtoul(g, &end, 10);
	if (!errno && !*end && end != g && id < (gid_t)-1)
		OK(p, "socket_group", "gid %lu", id);
	else
		BAD(p, "socket_group", "'%s': no such group", g);
}

int tierd_check_probe(const struct tierd_config *c, FILE *out, FILE *err)
{
	struct probe p = { .out = out, .err = err };
	char what[32];

	if (c->backend == TIERD_BACKEND_LOCAL) {
		probe_data_dir(&p, c->data_dir ? c->data_dir : "/var/lib/tierd");
		probe_pools(&p, c);
	}
	if (c->admin_socket && c->admin_socket[0])
		probe_unix(&p, "admin_socket", c->admin_socket);
	for (size_t i = 0; i < c->n_listen; i++) {
		snprintf(what, sizeof(what), "listen[%zu]", i);
		probe_listen(&p, what, c->listen[i]);
	}
	if (c->prometheus && c->prometheus[0])
		probe_tcp(&p, "prometheus", c->prometheus);
	probe_group(&p, c->socket_group);
	probe_tls(&p, c);
	if (c->backend == TIERD_BACKEND_RADOS) {
#if HAVE_RADOS
		probe_rados(&p, c);
#else
		BAD(&p, "backend", "rados, but this tierd was built without librados");
#endif
	}
	return p.errors;
}
