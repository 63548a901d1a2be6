/* SPDX-License-Identifier: MIT */
/*
 * test_config.c - tierd's config file: defaults, units, ranges, enum values,
 * several listen addresses, image sections, cross-checks, and errors that
 * name FILE:LINE, the section, the key and what is allowed.
 */
#undef NDEBUG
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/config.h"
#include "tier/engine.h"

static char conf_path[256];
static char err[2048];

static int setup(void **state)
{
	(void)state;
	snprintf(conf_path, sizeof(conf_path), "/tmp/tierd-test-config-%d.conf", (int)getpid());
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(conf_path);
	return 0;
}

static int load(const char *text, struct tierd_config **c)
{
	FILE *f = fopen(conf_path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	err[0] = '\0';
	return tierd_config_load(conf_path, c, err, sizeof(err));
}

static struct tierd_config *load_ok(const char *text)
{
	struct tierd_config *c = NULL;
	int r = load(text, &c);
	if (r != 0)
		fail_msg("load failed: %d %s", r, err);
	assert_non_null(c);
	return c;
}

/* Loads text, expects error r and a message starting "PATH:LINE: " + want. */
static void load_fails(const char *text, int r, int line, const char *want)
{
	struct tierd_config *c = (void *)1;
	char prefix[300];
	assert_int_equal(load(text, &c), r);
	assert_null(c);
	if (line > 0)
		snprintf(prefix, sizeof(prefix), "%s:%d: ", conf_path, line);
	else
		snprintf(prefix, sizeof(prefix), "%s: ", conf_path);
	if (strncmp(err, prefix, strlen(prefix)) != 0 || !strstr(err, want))
		fail_msg("error '%s' lacks '%s' ... '%s'", err, prefix, want);
}

static void test_empty_file_gives_defaults(void **state)
{
	struct tierd_config *c = load_ok("# nothing here\n");
	struct tier_devmodel_params hdd;
	struct tier_params p;
	(void)state;
	assert_int_equal(c->backend, TIERD_BACKEND_LOCAL);
	assert_int_equal(c->n_listen, 1);
	assert_string_equal(c->listen[0], "unix:/run/tierd/nbd.sock");
	assert_int_equal(c->tls, 0);
	assert_false(c->allow_plaintext);
	assert_int_equal(c->socket_mode, 0660);
	assert_null(c->socket_group);
	assert_int_equal(c->max_connections, 0);
	assert_int_equal(c->max_bytes_in_flight, 512ull << 20);
	assert_int_equal(c->transmission_timeout_ms, 30000);
	assert_int_equal(c->shutdown_timeout_ms, 30000);
	assert_int_equal(c->client_timeout_ms, 10000);
	assert_string_equal(c->admin_socket, "/run/tierd/tierd.asok");
	assert_string_equal(c->data_dir, "/var/lib/tierd");
	assert_int_equal(c->log_level, TIER_LOG_INFO);
	assert_null(c->prometheus);
	assert_int_equal(c->max_requests_per_conn, 64);
	assert_int_equal(c->max_bytes_per_conn, 64u << 20);
	assert_int_equal(c->handshake_timeout_ms, 30000);
	assert_false(c->direct_io);
	assert_int_equal(c->threads, 1);   /* one loop: docs/OPERATIONS.md, threads */
	/* real speed by default: no device model unless asked for */
	assert_int_equal(tier_devmodel_profile("none", &hdd), 0);
	assert_memory_equal(&c->base_model, &hdd, sizeof(hdd));
	assert_memory_equal(&c->cache_model, &hdd, sizeof(hdd));
	assert_int_equal(c->base_model.read_latency_us + c->cache_model.write_latency_us, 0);
	assert_null(c->base_dir);
	assert_null(c->cache_dir);
	{
		char d[256];

		tierd_config_pool_dir(c, false, d, sizeof(d));
		assert_string_equal(d, "/var/lib/tierd/base");
		tierd_config_pool_dir(c, true, d, sizeof(d));
		assert_string_equal(d, "/var/lib/tierd/cache");
	}
	assert_string_equal(c->rados_conf, "/etc/ceph/ceph.conf");
	assert_string_equal(c->rados_client_name, "client.admin");
	assert_string_equal(c->rados_base_pool, "rbd");
	assert_string_equal(c->rados_cache_pool, "rbd-cache");
	assert_null(c->rados_keyring);
	assert_int_equal(c->rados_op_timeout_ms, 30000);
	tier_params_default(&p);
	assert_memory_equal(&c->tier, &p, sizeof(p));
	assert_int_equal(c->n_images, 0);
	assert_string_equal(c->path, conf_path);
	tierd_config_free(c);
}

static void test_full_file_with_units(void **state)
{
	struct tierd_config *c = load_ok(
		"[global]\n"
		"backend = local\n"
		"admin_socket = /tmp/x.asok\n"
		"log_level = debug   ; inline comment\n"
		"prometheus = 127.0.0.1:9464\n"
		"max_requests_per_conn = 128\n"
		"max_bytes_per_conn = 32M  # another comment\n"
		"[local]\n"
		"data_dir = /srv/tierd\n"
		"direct_io = yes\n"
		"base_bandwidth = 100M/s\n"
		"[rados]\n"
		"client_name = tierd\n"
		"op_timeout = 10\n"
		"base_namespace = ns1\n"
		"[tier]\n"
		"target max bytes = 2G\n"
		"cache-min-flush-age = 1m\n"
		"cache_target_full_ratio = 0.9\n"
		"promote_granularity = extent\n"
		"evict_policy = s3fifo\n");
	(void)state;
	assert_string_equal(c->admin_socket, "/tmp/x.asok");
	assert_int_equal(c->log_level, TIER_LOG_DEBUG);
	assert_string_equal(c->prometheus, "127.0.0.1:9464");
	assert_int_equal(c->max_requests_per_conn, 128);
	assert_int_equal(c->max_bytes_per_conn, 32u << 20);
	assert_string_equal(c->data_dir, "/srv/tierd");
	assert_true(c->direct_io);
	assert_int_equal(c->base_model.bandwidth, 100u << 20);
	assert_string_equal(c->rados_client_name, "client.tierd");
	assert_int_equal(c->rados_op_timeout_ms, 10000);   /* bare = seconds */
	assert_string_equal(c->rados_base_ns, "ns1");
	assert_null(c->rados_cache_ns);
	assert_true(c->tier.target_max_bytes == 2ull << 30);
	assert_int_equal(c->tier.cache_min_flush_age, 60000);
	assert_true(c->tier.cache_target_full_ratio == 0.9);
	assert_int_equal(c->tier.promote_granularity, TIER_GRAN_EXTENT);
	assert_int_equal(c->tier.evict_policy, TIER_EVICT_S3FIFO);
	tierd_config_free(c);
}

/* A listener the network can reach serves plaintext only when told to. */
static void test_security_keys(void **state)
{
	struct tierd_config *c;
	(void)state;
	load_fails("[global]\nlisten = 0.0.0.0:10809\n", -EPERM, 0,
		   "[global] listen: '0.0.0.0:10809' is reachable from the network but tls is off");
	load_fails("[global]\nlisten = 192.168.1.5:10809\ntls = on\ntls_psk_file = /k\n", -EPERM, 0,
		   "tls is on: set tls = require");
	load_fails("[global]\nlisten = [::]:10809\n", -EPERM, 0, "reachable from the network");
	load_fails("[global]\ntls = require\n", -EINVAL, 0, "needs tls_certificates = DIR or tls_psk_file");
	load_fails("[global]\ntls = maybe\n", -EINVAL, 2, "bad value 'maybe' (allowed: off|on|require)");
	load_fails("[global]\ntls_verify_peer = true\ntls = on\ntls_psk_file = /k\n", -EINVAL, 0,
		   "tls_verify_peer: needs tls_certificates");
	load_fails("[global]\nsocket_mode = 0999\n", -EINVAL, 2, "bad mode '0999'");
	load_fails("[global]\nsocket_mode = 01777\n", -EINVAL, 2, "bad mode");
	load_fails("[global]\nmax_bytes_in_flight = 4K\n", -ERANGE, 2, "out of range");
	c = load_ok("[global]\nlisten = 127.0.0.1:1, [::1]:2, 127.9.9.9:3, unix:/x\n");
	tierd_config_free(c);
	c = load_ok("[global]\nlisten = 10.0.0.1:10809\ntls = require\n"
		    "tls_certificates = /etc/tierd/pki\ntls_verify_peer = yes\n"
		    "socket_mode = 0600\nsocket_group = disk\nmax_connections = 100\n"
		    "max_bytes_in_flight = 256M\ntransmission_timeout = 5s\n"
		    "shutdown_timeout = 10s\nclient_timeout = 2s\n");
	assert_int_equal(c->tls, 2);
	assert_string_equal(c->tls_certificates, "/etc/tierd/pki");
	assert_true(c->tls_verify_peer);
	assert_int_equal(c->socket_mode, 0600);
	assert_string_equal(c->socket_group, "disk");
	assert_int_equal(c->max_connections, 100);
	assert_int_equal(c->max_bytes_in_flight, 256ull << 20);
	assert_int_equal(c->transmission_timeout_ms, 5000);
	assert_int_equal(c->shutdown_timeout_ms, 10000);
	assert_int_equal(c->client_timeout_ms, 2000);
	tierd_config_free(c);
	c = load_ok("[global]\nlisten = 0.0.0.0:10809\nallow_plaintext = true\n");
	assert_true(c->allow_plaintext);
	tierd_config_free(c);
	assert_true(tierd_addr_is_loopback("127.0.0.1:10809"));
	assert_true(tierd_addr_is_loopback("[::1]:10809"));
	assert_false(tierd_addr_is_loopback("0.0.0.0:10809"));
	assert_false(tierd_addr_is_loopback("127.evil.example:1"));
	assert_false(tierd_addr_is_loopback("[::]:1"));
	assert_false(tierd_addr_is_loopback("unix:/x"));
}

static void test_multiple_listens(void **state)
{
	struct tierd_config *c = load_ok(
		"[global]\n"
		"listen = unix:/run/tierd/nbd.sock\n"
		"listen = 0.0.0.0:10809, [::1]:10810\n"
		"allow_plaintext = true\n");
	(void)state;
	assert_int_equal(c->n_listen, 3);   /* the default is replaced, not kept */
	assert_string_equal(c->listen[0], "unix:/run/tierd/nbd.sock");
	assert_string_equal(c->listen[1], "0.0.0.0:10809");
	assert_string_equal(c->listen[2], "[::1]:10810");
	tierd_config_free(c);

	load_fails("[global]\nlisten = 127.0.0.1\n", -EINVAL, 2,
		   "[global] listen: bad address '127.0.0.1' (allowed: unix:/PATH, HOST:PORT");
	load_fails("[global]\nlisten = localhost:99999\n", -EINVAL, 2, "bad address");
	load_fails("[global]\nlisten = a:1, a:1\n", -EINVAL, 2, "listed twice");
	load_fails("[global]\nlisten = a:1,a:2,a:3,a:4,a:5\nlisten = a:6,a:7,a:8,a:9\n", -E2BIG, 3,
		   "at most 8");
	load_fails("[global]\nlisten =\n", -EINVAL, 2, "empty");
}

static void test_unknown_key_names_file_line(void **state)
{
	(void)state;
	load_fails("[global]\n\nlisne = 1.2.3.4:5\n", -ENOENT, 3,
		   "[global] lisne: unknown key, did you mean 'listen'? (allowed: backend, listen,");
	load_fails("[tier]\ntarget_max_byte = 1G\n", -ENOENT, 2,
		   "[tier] target_max_byte: unknown key, did you mean 'target_max_bytes'?");
	load_fails("[local]\nfoo = 1\n", -ENOENT, 2, "(allowed: data_dir, base_dir, cache_dir, direct_io, base_profile");
	load_fails("[global]\nlog_level = info\n[bogus]\nx = 1\n", -EINVAL, 3,
		   "[bogus]: unknown section (allowed: global, local, rados, tier, image.NAME)");
	load_fails("orphan = 1\n", -EINVAL, 1, "key outside any section");
	load_fails("[global]\nlog_level = info\nlog_level = warn\n", -EINVAL, 3,
		   "duplicate key (first set at line 2)");
	load_fails("[global]\nthis line has no equals sign\n", -EINVAL, 2, "syntax error");
}

static void test_first_error_in_file_order(void **state)
{
	(void)state;
	load_fails("[tier]\nhit_set_count = 0\n[global]\nbackend = ceph\n", -ERANGE, 2,
		   "[tier] hit_set_count: out of range '0' (allowed: 1..64)");
}

static void test_bad_values_and_ranges(void **state)
{
	(void)state;
	load_fails("[global]\nbackend = ceph\n", -EINVAL, 2,
		   "[global] backend: bad value 'ceph' (allowed: local|rados)");
	load_fails("[global]\nlog_level = loud\n", -EINVAL, 2, "(allowed: error|warn|info|debug)");
	load_fails("[global]\nmax_requests_per_conn = 0\n", -ERANGE, 2, "(allowed: 1..4096)");
	load_fails("[global]\nmax_bytes_per_conn = 12Q\n", -EINVAL, 2, "bad value '12Q'");
	load_fails("[global]\nprometheus = nope\n", -EINVAL, 2, "HOST:PORT");
	load_fails("[global]\nhandshake_timeout = 500ms\n", -ERANGE, 2, "handshake_timeout");
	load_fails("[global]\nhandshake_timeout = 2h\n", -ERANGE, 2, "handshake_timeout");
	load_fails("[local]\nbase_profile = nvme\n", -EINVAL, 2, "(allowed: hdd|hdd-journal|ssd|none)");
	load_fails("[local]\ndirect_io = perhaps\n", -EINVAL, 2, "true|false");
	load_fails("[local]\ncache_latency_us = 20000000\n", -ERANGE, 2, "0..10000000");
	load_fails("[rados]\nop_timeout = 2h\n", -ERANGE, 2, "units ms/s/m/h");
	load_fails("[tier]\ncache_mode = forward\n", -EINVAL, 2,
		   "(allowed: writeback|readproxy|proxy|readonly|none)");
	load_fails("[tier]\nhit_set_type = explicit_object\n", -EINVAL, 2, "(allowed: bloom)");
	load_fails("[tier]\nobject_size = 3K\n", -ERANGE, 2, "4K..64M");
}

/* tier_preset: its values under every explicit [tier] key, wherever it stands. */
static void test_tier_preset(void **state)
{
	struct tierd_config *c;
	(void)state;
	c = load_ok("[tier]\nmin_read_recency_for_promote = 3\ntier_preset = ceph\n"
		    "target_max_bytes = 2G\n");
	assert_int_equal(c->tier.promote_granularity, TIER_GRAN_OBJECT);
	assert_int_equal(c->tier.min_write_recency_for_promote, 1);
	assert_int_equal(c->tier.min_read_recency_for_promote, 3);   /* set before: still wins */
	assert_true(c->tier.target_max_bytes == 2ull << 30);
	assert_int_equal(c->tier.promote_max_objects_sec, 25);
	tierd_config_free(c);
	c = load_ok("[tier]\ntier_preset = tierd\n");
	assert_int_equal(c->tier.promote_granularity, TIER_GRAN_EXTENT);
	assert_int_equal(c->tier.min_write_recency_for_promote, 0);
	tierd_config_free(c);
	c = load_ok("[tier]\npromote_granularity = extent\ntier_preset = promote-always\n");
	assert_int_equal(c->tier.promote_granularity, TIER_GRAN_EXTENT);
	assert_int_equal(c->tier.write_miss, TIER_WMISS_PROMOTE);
	tierd_config_free(c);
	load_fails("[tier]\n\ntier_preset = fast\n", -EINVAL, 3,
		   "unknown preset 'fast' (allowed: tierd, ceph, promote-always)");
	load_fails("[tier]\ntier_preset = ceph\ntier_preset = ceph\n", -EINVAL, 3,
		   "duplicate key");
}

static void test_device_model_overrides(void **state)
{
	struct tier_devmodel_params ssd, none;
	struct tierd_config *c = load_ok(
		"[local]\n"
		"base_latency_us = 8000\n"
		"base_write_latency_us = 500\n"
		"base_queue_depth = 4\n"
		"base_profile = ssd\n"      /* applied first whatever its position */
		"cache_profile = none\n");
	(void)state;
	tier_devmodel_profile("ssd", &ssd);
	tier_devmodel_profile("none", &none);
	assert_int_equal(c->base_model.read_latency_us, 8000);
	assert_int_equal(c->base_model.write_latency_us, 500);
	assert_int_equal(c->base_model.queue_depth, 4);
	assert_int_equal(c->base_model.bandwidth, ssd.bandwidth);
	assert_memory_equal(&c->cache_model, &none, sizeof(none));
	tierd_config_free(c);
}

static void test_image_sections(void **state)
{
	struct tierd_config *c = load_ok(
		"[image.vm1]\nsize = 10G\n"
		"[image.scratch-2]\nsize = 512M\nread_only = true\n");
	(void)state;
	assert_int_equal(c->n_images, 2);
	assert_string_equal(c->images[0].name, "vm1");
	assert_true(c->images[0].size == 10ull << 30);
	assert_false(c->images[0].read_only);
	assert_null(c->images[0].rbd_image);
	assert_string_equal(c->images[1].name, "scratch-2");
	assert_true(c->images[1].read_only);
	tierd_config_free(c);

	c = load_ok("[global]\nbackend = rados\n"
		    "[image.a]\n"
		    "[image.b]\nrbd_image = other\n");
	assert_int_equal(c->n_images, 2);
	assert_string_equal(c->images[0].rbd_image, "a");   /* defaults to NAME */
	assert_string_equal(c->images[1].rbd_image, "other");
	tierd_config_free(c);

	load_fails("[image.bad/name]\nsize = 1G\n", -EINVAL, 1, "bad image name 'bad/name'");
	load_fails("[image.x]\nsize = 1G\nsize_gb = 1\n", -ENOENT, 3,
		   "(allowed: size, rbd_image, read_only, lock_handoff)");
}

static void test_cross_checks(void **state)
{
	(void)state;
	load_fails("[global]\nbackend = local\n\n[image.vm]\nread_only = true\n", -EINVAL, 4,
		   "[image.vm] size: required with backend = local");
	load_fails("[image.vm]\nsize = 1000\n", -EINVAL, 1, "not a multiple of 512");
	load_fails("[image.vm]\nsize = 1G\nrbd_image = vm\n", -EINVAL, 1,
		   "[image.vm] rbd_image: only with backend = rados");
	load_fails("[image.vm]\nsize = 1G\n[global]\nbackend = rados\n", -EINVAL, 1,
		   "[image.vm] size: the size comes from the RBD header");
	load_fails("# c\n[tier]\ncache_target_dirty_ratio = 0.7\ncache_target_dirty_high_ratio = 0.5\n",
		   -EINVAL, 2, "[tier]: cache_target_dirty_ratio (0.7) must not exceed");
}

static void test_file_problems(void **state)
{
	struct tierd_config *c = (void *)1;
	char longline[400];
	(void)state;
	assert_int_equal(tierd_config_load("/nonexistent/tierd.conf", &c, err, sizeof(err)), -ENOENT);
	assert_null(c);
	assert_non_null(strstr(err, "/nonexistent/tierd.conf: cannot open"));
	memset(longline, 'x', sizeof(longline));
	memcpy(longline, "[global]\nadmin_socket = /", 25);
	strcpy(longline + sizeof(longline) - 2, "\n");
	load_fails(longline, -EINVAL, 2, "line too long");
	tierd_config_free(NULL);
}

#ifdef EXAMPLE_CONF
/* deploy/tierd.conf.example loads as shipped and with every key uncommented
 * (except rbd_image, which belongs to the rados backend). */
static void test_example_file_loads(void **state)
{
	FILE *f = fopen(EXAMPLE_CONF, "r");
	char line[512], *text = calloc(1, 65536);
	size_t n = 0, keys = 0;
	struct tierd_config *c;
	(void)state;
	assert_non_null(f);
	assert_non_null(text);
	while (fgets(line, sizeof(line), f)) {
		const char *l = line;
		size_t k = 1;
		while (line[0] == '#' && (line[k] == '_' || (line[k] >= 'a' && line[k] <= 'z')))
			k++;
		if ((line[0] == '#' && k > 1 && !strncmp(line + k, " =", 2) &&
		     strncmp(line, "#rbd_image", 10)) || !strncmp(line, "#[image.", 8)) {
			l = line + 1;
			keys++;
		}
		n += (size_t)snprintf(text + n, 65536 - n, "%s", l);
	}
	fclose(f);
	assert_true(keys > 50);   /* every key of every section */
	c = load_ok(text);
	assert_int_equal(c->n_listen, 2);
	assert_int_equal(c->n_images, 1);
	assert_true(c->images[0].size == 10ull << 30);
	tierd_config_free(c);
	free(text);
	assert_int_equal(tierd_config_load(EXAMPLE_CONF, &c, err, sizeof(err)), 0);
	tierd_config_free(c);
}
#endif

/*
 * tierd_config_key_info (the man page's source) lists keys the parser
 * accepts: each one, set to the default it names, loads, and an unknown
 * key is refused; the walk ends with -ENOENT and covers every section.
 */
static void test_key_info_defaults_load(void **state)
{
	struct tierd_config_key k;
	const char *last = NULL;
	char text[512];
	size_t i, sections = 0, live_other = 0, restart_tier = 0;
	int r;
	(void)state;
	for (i = 0; (r = tierd_config_key_info(i, &k)) == 0; i++) {
		bool image = !strcmp(k.section, "image.NAME");
		struct tierd_config *c;

		assert_non_null(k.key);
		assert_true(k.allowed[0] != '\0');
		if (!last || strcmp(last, k.section))
			sections++;
		last = k.section;
		if (strcmp(k.section, "tier"))
			live_other += k.live;
		else
			restart_tier += !k.live;
		if (!k.def[0] || !strcmp(k.def, "from the profile"))
			continue;
		snprintf(text, sizeof(text), "[%s]\n%s = %s\n%s", image ? "image.vm" : k.section,
			 k.key, k.def, image && strcmp(k.key, "size") ? "size = 1G\n" :
			 !image ? "[image.vm]\nsize = 1G\n" : "");
		c = load_ok(text);
		tierd_config_free(c);
	}
	assert_int_equal(r, -ENOENT);
	assert_int_equal(sections, 5);
	assert_true(i > 70);
	/* outside [tier] a reload applies five keys; in it all but the layout's two */
	assert_int_equal(live_other, 5);
	assert_int_equal(restart_tier, 2);
	assert_int_equal(tierd_config_key_info(i + 10, &k), -ENOENT);
	load_fails("[global]\nno_such_key = 1\n", -ENOENT, 2, "unknown key");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_file_gives_defaults),
		cmocka_unit_test(test_full_file_with_units),
		cmocka_unit_test(test_multiple_listens),
		cmocka_unit_test(test_unknown_key_names_file_line),
		cmocka_unit_test(test_first_error_in_file_order),
		cmocka_unit_test(test_bad_values_and_ranges),
		cmocka_unit_test(test_tier_preset),
		cmocka_unit_test(test_device_model_overrides),
		cmocka_unit_test(test_image_sections),
		cmocka_unit_test(test_cross_checks),
		cmocka_unit_test(test_security_keys),
		cmocka_unit_test(test_file_problems),
		cmocka_unit_test(test_key_info_defaults_load),
#ifdef EXAMPLE_CONF
		cmocka_unit_test(test_example_file_loads),
#endif
	};
	return cmocka_run_group_tests_name("config", tests, setup, teardown);
}
