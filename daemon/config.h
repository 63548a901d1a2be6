/* SPDX-License-Identifier: MIT */
/*
 * daemon/config.h - tierd's configuration file (INI, parsed with libinih).
 * Sections [global], [local], [rados], [tier], [image.NAME].  Loading never
 * half-applies: tierd_config_load() builds a fresh struct or fails with a
 * message naming file:line and the allowed values.
 */
#ifndef TIERD_CONFIG_H
#define TIERD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tier/params.h"
#include "tier/store.h"

#define TIERD_MAX_LISTEN 8
#define TIERD_DEFAULT_LISTEN "unix:/run/tierd/nbd.sock"
#define TIERD_MAX_IMAGES 64

enum tierd_backend { TIERD_BACKEND_LOCAL = 0, TIERD_BACKEND_RADOS };

struct tierd_image_cfg {
	char *name;         /* export name (the NAME of [image.NAME]) */
	uint64_t size;      /* local: bytes */
	char *rbd_image;    /* rados: RBD image name in base_pool */
	bool read_only;
	int lock_handoff;   /* rados: 0 on_request (hand over when asked), 1 never */
};

struct tierd_config {
	char *path;                 /* file it came from */
	/* [global] */
	enum tierd_backend backend;
	char *listen[TIERD_MAX_LISTEN];   /* "unix:/path" or "host:port" */
	size_t n_listen;
	char *admin_socket;
	int log_level;              /* enum tier_log_level */
	char *prometheus;           /* "127.0.0.1:9464" or NULL = off */
	uint32_t max_requests_per_conn;   /* backpressure caps */
	uint64_t max_bytes_per_conn;
	uint64_t handshake_timeout_ms;    /* NBD option haggling deadline */
	/* security (docs/SECURITY.md) */
	int tls;                          /* enum nbd_tls_mode: off, on, require */
	char *tls_certificates;           /* dir: ca-cert.pem server-cert.pem server-key.pem */
	char *tls_psk_file;               /* psktool format */
	char *tls_priority;               /* GnuTLS priority string, NULL = built-in */
	bool tls_verify_peer;             /* require a client certificate */
	bool allow_plaintext;             /* non-loopback TCP without tls = require */
	uint32_t socket_mode;             /* unix listeners' mode (octal), default 0660 */
	char *socket_group;               /* their group, NULL = the daemon's */
	uint32_t max_connections;         /* 0 = from RLIMIT_NOFILE */
	uint64_t max_bytes_in_flight;     /* request bytes across all connections */
	uint64_t transmission_timeout_ms; /* a WRITE payload that stalls this long */
	uint64_t shutdown_timeout_ms;     /* SIGTERM drain deadline */
	uint64_t client_timeout_ms;       /* admin and prometheus clients */
	uint32_t busy_poll_us;            /* spin this long for work before a loop sleeps; 0 = never */
	uint32_t threads;                 /* 1 (default) = one loop; >1: NBD I/O thread; 0 = the number of cores */
	/* [local] */
	char *data_dir;
	char *base_dir, *cache_dir;       /* NULL: data_dir/base, data_dir/cache */
	struct tier_devmodel_params base_model, cache_model;
	bool direct_io;
	/* [rados] */
	char *rados_conf;
	char *rados_client_name;
	char *rados_keyring;
	char *rados_base_pool, *rados_cache_pool;
	char *rados_base_ns, *rados_cache_ns;
	uint64_t rados_op_timeout_ms;
	/* [tier] */
	struct tier_params tier;
	/* [image.NAME] */
	struct tierd_image_cfg images[TIERD_MAX_IMAGES];
	size_t n_images;
};

/*
 * Parse path.  Returns 0 and *out (free with tierd_config_free), or -errno
 * with a human message in err ("FILE:LINE: key 'x': ...").
 */
/* The directory of the local backend's base (cache false) or cache pool. */
void tierd_config_pool_dir(const struct tierd_config *c, bool cache, char *buf, size_t len);
int tierd_config_load(const char *path, struct tierd_config **out,
		      char *err, size_t errlen);
void tierd_config_free(struct tierd_config *c);   /* NULL ok */
/* Defaults used when a key is absent (exposed for tests and `config show`). */
void tierd_config_defaults(struct tierd_config *c);
/* "HOST:PORT" whose host is an IPv4 or IPv6 loopback address (127/8, ::1). */
bool tierd_addr_is_loopback(const char *addr);

/* One key the file accepts, as text (the man page tierd.conf(5) and its test). */
struct tierd_config_key {
	const char *section;   /* "global", "local", "rados", "tier", "image.NAME" (static) */
	const char *key;       /* static */
	char def[64];          /* the default as the file spells it; "" none */
	char allowed[192];     /* the values the parser accepts */
	bool live;             /* a reload applies it; otherwise it waits for a restart */
};
/*
 * The i-th key the parser accepts, sections in the order above, keys in
 * their table's order: 0 and *out; -ENOENT past the last; -ENOMEM.
 */
int tierd_config_key_info(size_t i, struct tierd_config_key *out);

#endif
