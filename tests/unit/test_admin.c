/* SPDX-License-Identifier: MIT */
/*
 * test_admin.c - the admin socket against a fake engine: socket mode 0600,
 * stale and live sockets, JSON answers for every command, `config set`
 * validation (ranges, cross checks, non-live keys, hook errors), flush/evict/
 * promote reaching the engine with the right image, pipelined commands and
 * over-long lines.  A client thread talks to the socket while the loop runs
 * on the test thread; assertions happen after the loop has stopped.
 */
#undef NDEBUG
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <jansson.h>

#include <cmocka.h>

#include "daemon/admin.h"

/* ---- fake engine ---- */

struct tier_engine {
	struct tier_params params;
	struct tier_stats stats;
	int flush_calls, evict_calls, promote_calls;
	struct tier_image *last_img;
	uint64_t promote_off, promote_len;
};

struct tier_image {
	const char *name;
	uint64_t size;
	int ready;
	bool ro;
	struct tier_stats stats;
};

static struct tier_engine fake;
static struct tier_image fake_imgs[2] = {{"vm1", 10ull << 30, 1, true, {0}},
					 {"vm2", 1ull << 20, 0, false, {0}}};

void tier_image_get_stats(const struct tier_image *img, struct tier_stats *out)
{
	*out = img->stats;
}

void tier_engine_get_stats(const struct tier_engine *e, struct tier_stats *out)
{
	*out = e->stats;
}

const struct tier_params *tier_engine_params(const struct tier_engine *e)
{
	return &e->params;
}

size_t tier_engine_images(struct tier_engine *e, struct tier_image **arr, size_t max)
{
	(void)e;
	for (size_t i = 0; i < 2 && i < max; i++)
		arr[i] = &fake_imgs[i];
	return 2;
}

struct tier_image *tier_engine_find_image(struct tier_engine *e, const char *name)
{
	(void)e;
	for (int i = 0; i < 2; i++)
		if (!strcmp(fake_imgs[i].name, name))
			return &fake_imgs[i];
	return NULL;
}

int tier_image_ready(const struct tier_image *img) { return img->ready; }
const char *tier_image_name(const struct tier_image *img) { return img->name; }
uint64_t tier_image_size(const struct tier_image *img) { return img->size; }
bool tier_image_read_only(const struct tier_image *img) { return img->ro; }

int tier_engine_flush_all(struct tier_engine *e, struct tier_image *img)
{
	e->flush_calls++;
	e->last_img = img;
	return 0;
}

int tier_engine_evict_all(struct tier_engine *e, struct tier_image *img)
{
	e->evict_calls++;
	e->last_img = img;
	return 0;
}

int tier_engine_promote(struct tier_engine *e, struct tier_image *img, uint64_t off, uint64_t len)
{
	e->promote_calls++;
	e->last_img = img;
	e->promote_off = off;
	e->promote_len = len;
	return off + len > img->size ? -EINVAL : 0;
}

/* The current set and one archived set, as the admin command must print them. */
int tier_engine_hitset_info(const struct tier_engine *e, struct tier_hitset_info *out,
			    size_t max)
{
	static const struct tier_hitset_info sets[] = {
		{ .set = -1, .start_ms = 2000, .inserts = 3, .unique = 3, .capacity = 1024,
		  .bits = 6400, .bits_set = 12, .k = 4, .fpp = 0.05 },
		{ .set = 0, .start_ms = 1000, .end_ms = 2000, .inserts = 15000, .unique = 5010,
		  .capacity = 1024, .bits = 6400, .bits_set = 6336, .k = 4, .fpp = 0.05 },
	};
	(void)e;
	for (size_t i = 0; i < max && i < 2; i++)
		out[i] = sets[i];
	return 2;
}

size_t tier_engine_bytes_per_object(const struct tier_engine *e)
{
	(void)e;
	return 48;
}

void tier_store_get_stats(const struct tier_store *st, struct tier_store_stats *out)
{
	(void)st;
	memset(out, 0, sizeof(*out));
}
const char *tier_store_pool_name(const struct tier_store *st) { (void)st; return "p"; }
const char *tier_store_backend_name(const struct tier_store *st) { (void)st; return "mem"; }
uint64_t tier_store_in_flight(const struct tier_store *st) { (void)st; return 0; }
const char *tier_store_opcode_name(enum tier_store_opcode op) { (void)op; return "op"; }

/* ---- daemon hooks ---- */

static struct tierd_config cfg;
static int reload_calls, set_calls;
static int set_params_result;

static struct tier_engine *hook_engine(void *arg) { (void)arg; return &fake; }
static const struct tierd_config *hook_config(void *arg) { (void)arg; return &cfg; }

static int hook_reload(void *arg, char *err, size_t len)
{
	(void)arg;
	reload_calls++;
	if (reload_calls > 1) {
		snprintf(err, len, "tierd.conf:7: [tier] bad: nope");
		return -EINVAL;
	}
	snprintf(err, len, "listen,image.vm2 (removed)");   /* what waits for a restart */
	return 0;
}

static int hook_set_params(void *arg, const struct tier_params *p, char *err, size_t len)
{
	(void)arg;
	set_calls++;
	if (set_params_result < 0) {
		snprintf(err, len, "engine refused");
		return set_params_result;
	}
	fake.params = *p;
	return 0;
}

static const struct tierd_admin_hooks hooks = {
	.engine = hook_engine, .config = hook_config,
	.reload = hook_reload, .set_params = hook_set_params,
};

/* ---- harness: loop on this thread, client on another ---- */

#define MAX_ANS 32
struct script {
	const char *send;      /* written in one go; may hold several lines */
	size_t send_len;       /* 0: strlen(send) */
	bool ceph;             /* one answer framed by a 4-byte big-endian length */
	int expect_lines;
	char *answers[MAX_ANS];
	int n_answers;
	bool want_eof;         /* wait for the server to close */
	bool eof;              /* server closed the connection */
};

static char sock_path[108];
static uv_loop_t loop;
static uv_async_t done_async;
static struct tierd_admin *admin;

static int client_connect(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	strcpy(sa.sun_path, sock_path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -1;
	return fd;
}

static void *client_main(void *arg)
{
	struct script *s = arg;
	char buf[65536];
	size_t len = 0;
	int fd = client_connect();

	if (fd >= 0 && send(fd, s->send, s->send_len ? s->send_len : strlen(s->send),
			    MSG_NOSIGNAL) >= 0) {
		while (s->ceph && s->n_answers < s->expect_lines) {
			uint32_t be;
			ssize_t r = len >= 4 ? 0 : recv(fd, buf + len, sizeof(buf) - len, 0);
			if (r < 0 || (r == 0 && len < 4))
				break;
			len += (size_t)r;
			if (len < 4)
				continue;
			memcpy(&be, buf, 4);
			if (len - 4 >= ntohl(be)) {
				s->answers[s->n_answers++] = strndup(buf + 4, ntohl(be));
				break;
			}
			r = recv(fd, buf + len, sizeof(buf) - len, 0);
			if (r <= 0)
				break;
			len += (size_t)r;
		}
		while (!s->ceph && s->n_answers < s->expect_lines) {
			char *nl = memchr(buf, '\n', len);
			if (nl) {
				s->answers[s->n_answers++] = strndup(buf, (size_t)(nl - buf));
				len -= (size_t)(nl - buf) + 1;
				memmove(buf, nl + 1, len);
				continue;
			}
			ssize_t r = recv(fd, buf + len, sizeof(buf) - len, 0);
			if (r <= 0)
				break;
			len += (size_t)r;
		}
		if (s->want_eof) {
			struct pollfd p = {.fd = fd, .events = POLLIN};
			s->eof = poll(&p, 1, 5000) == 1 && recv(fd, buf, 1, 0) <= 0;   /* FIN or RST */
		}
		close(fd);
	}
	uv_async_send(&done_async);
	return NULL;
}

static void on_done(uv_async_t *a)
{
	tierd_admin_stop(admin);
	admin = NULL;
	uv_close((uv_handle_t *)a, NULL);
}

static void run_script(struct script *s)
{
	pthread_t th;

	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(uv_async_init(&loop, &done_async, on_done), 0);
	assert_int_equal(tierd_admin_start(&loop, sock_path, &hooks, &admin), 0);
	assert_int_equal(pthread_create(&th, NULL, client_main, s), 0);
	uv_run(&loop, UV_RUN_DEFAULT);
	pthread_join(th, NULL);
	assert_int_equal(uv_loop_close(&loop), 0);   /* every handle closed */
	assert_int_equal(access(sock_path, F_OK), -1);   /* socket file removed */
	if (s->n_answers != s->expect_lines)
		fail_msg("got %d answers, wanted %d", s->n_answers, s->expect_lines);
}

static void free_script(struct script *s)
{
	for (int i = 0; i < s->n_answers; i++)
		free(s->answers[i]);
}

static void assert_has(const char *hay, const char *needle)
{
	if (!strstr(hay, needle))
		fail_msg("'%s' not in answer: %s", needle, hay);
}

static int setup(void **state)
{
	(void)state;
	snprintf(sock_path, sizeof(sock_path), "/tmp/tierd-test-admin-%d.asok", (int)getpid());
	unlink(sock_path);
	memset(&fake, 0, sizeof(fake));
	memset(&fake_imgs[0].stats, 0, sizeof(fake_imgs[0].stats));
	memset(&fake_imgs[1].stats, 0, sizeof(fake_imgs[1].stats));
	tier_params_default(&fake.params);
	tierd_config_defaults(&cfg);
	cfg.n_images = 1;
	cfg.images[0].name = (char *)"vm1";
	cfg.images[0].read_only = true;
	reload_calls = set_calls = 0;
	set_params_result = 0;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	cfg.n_images = 0;
	cfg.images[0].name = NULL;
	for (size_t i = 0; i < cfg.n_listen; i++)
		free(cfg.listen[i]);
	free(cfg.admin_socket);
	free(cfg.data_dir);
	free(cfg.rados_conf);
	free(cfg.rados_client_name);
	free(cfg.rados_base_pool);
	free(cfg.rados_cache_pool);
	unlink(sock_path);
	return 0;
}

/* ---- tests ---- */

static void test_socket_mode_stale_and_live(void **state)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct tierd_admin *second = NULL;
	struct stat st;
	int fd;
	(void)state;

	/* a stale socket: bound, never listened, closed without unlink */
	strcpy(sa.sun_path, sock_path);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	assert_int_equal(chmod(sock_path, 0777), 0);

	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(tierd_admin_start(&loop, sock_path, &hooks, &admin), 0);
	assert_int_equal(stat(sock_path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
	/* a live one belongs to someone else */
	assert_int_equal(tierd_admin_start(&loop, sock_path, &hooks, &second), -EADDRINUSE);
	assert_null(second);
	tierd_admin_stop(admin);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
	assert_int_equal(access(sock_path, F_OK), -1);

	/* a regular file is not ours to replace */
	fclose(fopen(sock_path, "w"));
	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(tierd_admin_start(&loop, sock_path, &hooks, &second), -EEXIST);
	assert_int_equal(uv_loop_close(&loop), 0);
	unlink(sock_path);
}

static void test_status_and_perf_dump(void **state)
{
	struct script s = {.send = "status\nperf dump\n", .expect_lines = 2};
	(void)state;
	fake.stats.read_hits = 90;
	fake.stats.read_misses = 10;
	fake.stats.dirty_bytes = 12345;
	fake.stats.flush_mode = TIER_FLUSH_LOW;
	fake.stats.evict_mode = TIER_EVICT_FULL;
	fake.stats.full_ratio_ppm = 250000;
	fake.stats.hitset_archives = 7;
	for (int i = 0; i < 100; i++)
		tier_lat_record(&fake.stats.lat[TIER_LAT_WRITE], i < 99 ? 100 : 50000);
	run_script(&s);
	assert_has(s.answers[0], "\"read_hit_ratio\": 0.9,");
	assert_has(s.answers[0], "\"write_hit_ratio\": null");   /* no writes yet */
	assert_has(s.answers[0], "\"full_ratio\": 0.25,");
	assert_has(s.answers[0], "\"flush_mode\": \"low\"");
	assert_has(s.answers[0], "\"evict_mode\": \"full\"");
	assert_has(s.answers[0], "\"dirty_bytes\": 12345");
	assert_has(s.answers[0], "\"images\": 2");
	assert_has(s.answers[0], "\"cache_mode\": \"writeback\"");
	assert_has(s.answers[1], "{\"tierd\": {");
	assert_has(s.answers[1], "\"hitset_archives\": 7");
	/* Ceph's time counters: avgcount, sum and avgtime in seconds */
	assert_has(s.answers[1], "\"write_latency\": {\"avgcount\": 100, \"sum\": 0.0599, "
				 "\"avgtime\": 0.000599}");
#define HAS_COUNTER(n) assert_has(s.answers[1], "\"" #n "\": ");
	TIER_COUNTERS(HAS_COUNTER)
	TIER_GAUGES(HAS_COUNTER)
#undef HAS_COUNTER
	free_script(&s);
}

/* Each image is a logger of its own with its own counters; every value perf
 * dump shows has a schema entry of the right type, and no more. */
static void test_perf_per_image_and_schema(void **state)
{
	struct script s = {.send = "perf dump\nperf schema\nperf dump tierd-image-vm2 read_ops\n"
				   "perf dump nope\n",
			   .expect_lines = 4};
	json_t *dump, *schema, *one;
	const char *logger, *name;
	json_t *sec, *v;
	(void)state;
	fake.stats.read_ops = 30;
	fake_imgs[0].stats.read_ops = 10;
	fake_imgs[1].stats.read_ops = 20;
	fake_imgs[1].stats.read_misses = 5;
	tier_lat_record(&fake_imgs[1].stats.lat[TIER_LAT_READ], 2000);
	run_script(&s);
	dump = json_loads(s.answers[0], 0, NULL);
	schema = json_loads(s.answers[1], 0, NULL);
	one = json_loads(s.answers[2], 0, NULL);
	assert_non_null(dump);
	assert_non_null(schema);
	assert_non_null(one);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(dump, "tierd"), "read_ops")), 30);
	sec = json_object_get(dump, "tierd-image-vm2");
	assert_int_equal(json_integer_value(json_object_get(sec, "read_ops")), 20);
	assert_int_equal(json_integer_value(json_object_get(sec, "read_misses")), 5);
	v = json_object_get(sec, "read_latency");
	assert_int_equal(json_integer_value(json_object_get(v, "avgcount")), 1);
	assert_true(json_real_value(json_object_get(v, "sum")) == 0.002);
	/* engine-only counters are not in an image's logger */
	assert_null(json_object_get(sec, "hitset_archives"));
	assert_int_equal(json_integer_value(json_object_get(json_object_get(dump, "tierd-image-vm1"),
							    "read_ops")), 10);
	assert_int_equal(json_object_size(dump), json_object_size(schema));
	json_object_foreach(dump, logger, sec) {
		json_t *ss = json_object_get(schema, logger);
		assert_non_null(ss);
		assert_int_equal(json_object_size(sec), json_object_size(ss));
		json_object_foreach(sec, name, v) {
			json_t *d = json_object_get(ss, name);
			int type = (int)json_integer_value(json_object_get(d, "type"));
			if (!d)
				fail_msg("%s.%s has no schema entry", logger, name);
			if (json_is_object(v))
				assert_int_equal(type, 0x5);   /* TIME | LONGRUNAVG */
			else
				assert_true(type == 0x2 || type == 0xa);   /* U64 [| COUNTER] */
			assert_non_null(json_string_value(json_object_get(d, "description")));
		}
	}
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(schema,
		"tierd"), "read_ops"), "metric_type")), "counter");
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(schema,
		"tierd"), "cached_bytes"), "metric_type")), "gauge");
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(schema,
		"tierd"), "cached_bytes"), "units")), "bytes");
	assert_string_equal(s.answers[2], "{\"tierd-image-vm2\": {\"read_ops\": 20}}");
	assert_has(s.answers[3], "{\"error\": \"no logger 'nope'");
	json_decref(dump);
	json_decref(schema);
	json_decref(one);
	free_script(&s);
}

/* Bytes that are not UTF-8, in a command or a JSON command: a valid JSON
 * error answer, and the connection goes on (tierctl's protocol). */
static void test_invalid_utf8_gives_valid_json(void **state)
{
	static const char bad[] = "config get \xff\xfe\xc0\x80target\nimages \xed\xa0\x80\n"
				  "status\n";
	struct script s = {.send = bad, .expect_lines = 3};
	(void)state;
	run_script(&s);
	for (int i = 0; i < 2; i++) {
		json_error_t err;
		json_t *j = json_loads(s.answers[i], 0, &err);
		if (!j)
			fail_msg("answer %d is not JSON (%s): %s", i, err.text, s.answers[i]);
		assert_non_null(strstr(json_string_value(json_object_get(j, "error")),
				       "not valid UTF-8"));
		json_decref(j);
	}
	assert_has(s.answers[0], "(byte 11)");
	assert_has(s.answers[2], "\"images\": 2");
	free_script(&s);

	/* the ceph framing: invalid UTF-8 inside the JSON text */
	static const char cbad[] = "{\"prefix\": \"config get\", \"var\": \"\xff\"}";
	struct script c = {.send = cbad, .send_len = sizeof(cbad), .ceph = true, .expect_lines = 1,
			   .want_eof = true};
	run_script(&c);
	json_t *j = json_loads(c.answers[0], 0, NULL);
	assert_non_null(j);
	assert_has(json_string_value(json_object_get(j, "error")), "invalid JSON command");
	json_decref(j);
	free_script(&c);
}

/* The ceph CLI's admin-socket protocol (`ceph daemon PATH perf dump`): a
 * NUL-ended JSON command, a 4-byte big-endian length, the JSON, then EOF. */
static void test_ceph_protocol(void **state)
{
	static const char dump[] = "{\"prefix\": \"perf dump\", \"format\": \"json\"}";
	static const char descs[] = "{\"prefix\": \"get_command_descriptions\"}";
	static const char set[] = "{\"prefix\": \"config set\", \"var\": \"target_max_bytes\", "
				  "\"val\": [\"3G\"]}";
	static const char flush[] = "{\"prefix\": \"flush\", \"image\": \"vm2\"}";
	struct script s = {.send = dump, .send_len = sizeof(dump), .ceph = true, .expect_lines = 1,
			   .want_eof = true};
	json_t *j, *v;
	const char *k;
	bool saw_perf_dump = false;
	(void)state;
	fake.stats.write_ops = 77;
	run_script(&s);
	assert_true(s.eof);
	assert_has(s.answers[0], "{\"tierd\": {\"read_ops\": 0, \"read_bytes\": 0, \"write_ops\": 77,");
	free_script(&s);

	struct script d = {.send = descs, .send_len = sizeof(descs), .ceph = true, .expect_lines = 1};
	run_script(&d);
	j = json_loads(d.answers[0], 0, NULL);
	assert_non_null(j);
	json_object_foreach(j, k, v) {
		json_t *sig = json_object_get(v, "sig");
		assert_true(json_is_array(sig));
		assert_non_null(json_string_value(json_object_get(v, "help")));
		if (!strcmp(json_string_value(json_array_get(sig, 0)), "perf") &&
		    !strcmp(json_string_value(json_array_get(sig, 1)), "dump"))
			saw_perf_dump = true;
	}
	assert_true(saw_perf_dump);
	json_decref(j);
	free_script(&d);

	/* named arguments map to the command's words */
	struct script c = {.send = set, .send_len = sizeof(set), .ceph = true, .expect_lines = 1};
	run_script(&c);
	assert_has(c.answers[0], "\"target_max_bytes\": \"3G\"");
	assert_true(fake.params.target_max_bytes == 3ull << 30);
	free_script(&c);
	struct script f = {.send = flush, .send_len = sizeof(flush), .ceph = true, .expect_lines = 1};
	run_script(&f);
	assert_has(f.answers[0], "\"started\": \"flush\"");
	assert_ptr_equal(fake.last_img, &fake_imgs[1]);
	free_script(&f);
}

static void test_config_show_get_set(void **state)
{
	struct script s = {
		.send = "config set target_max_bytes 2G\n"
			"config get target_max_bytes\n"
			"config set object_size 8M\n"
			"config set hit_set_count 0\n"
			"config set cache_target_dirty_ratio 0.9\n"
			"config set nope 1\n"
			"config set cache_mode\n"
			"config show\n",
		.expect_lines = 8};
	(void)state;
	run_script(&s);
	assert_has(s.answers[0], "{\"ok\": true, \"target_max_bytes\": \"2G\"");
	assert_true(fake.params.target_max_bytes == 2ull << 30);
	assert_has(s.answers[1], "{\"target_max_bytes\": \"2G\"}");
	assert_has(s.answers[2], "{\"error\": \"object_size cannot change on a running daemon");
	assert_has(s.answers[3], "{\"error\": \"hit_set_count: out of range '0' (allowed: 1..64)");
	assert_has(s.answers[4], "{\"error\": \"cache_target_dirty_ratio (0.9) must not exceed");
	assert_has(s.answers[5], "{\"error\": \"nope: unknown tier parameter");
	assert_has(s.answers[6], "{\"error\": \"usage: config set KEY VALUE\"}");
	assert_has(s.answers[7], "\"cache_mode\": \"writeback\"");
	assert_has(s.answers[7], "\"target_max_bytes\": \"2G\"");
	assert_int_equal(set_calls, 1);   /* only the valid one reached the daemon */
	free_script(&s);
}

static void test_set_params_hook_error_passes_through(void **state)
{
	struct script s = {.send = "config set agent_max_ops 8\n", .expect_lines = 1};
	(void)state;
	set_params_result = -EBUSY;
	run_script(&s);
	assert_string_equal(s.answers[0], "{\"error\": \"engine refused\"}");
	assert_int_equal(fake.params.agent_max_ops, 4);
	free_script(&s);
}

static void test_flush_evict_promote(void **state)
{
	struct script s = {
		.send = "flush\n"
			"evict --image vm2\n"
			"flush --image nope\n"
			"flush --imag vm1\n"
			"promote vm1 4M 8M\n"
			"promote vm1 4M 0\n"
			"promote vm1 10G 4K\n",
		.expect_lines = 7};
	(void)state;
	fake.stats.dirty_bytes = 4096;
	run_script(&s);
	assert_has(s.answers[0], "{\"ok\": true, \"started\": \"flush\", \"dirty_bytes\": 4096");
	assert_has(s.answers[1], "\"started\": \"evict\"");
	assert_int_equal(fake.flush_calls, 1);
	assert_int_equal(fake.evict_calls, 1);
	assert_has(s.answers[2], "{\"error\": \"no such image 'nope'\"}");
	assert_has(s.answers[3], "usage: flush [--image NAME]");
	assert_has(s.answers[4], "{\"ok\": true, \"offset\": 4194304, \"length\": 8388608}");
	assert_has(s.answers[5], "bad offset or length");
	assert_has(s.answers[6], "promote failed: Invalid argument");
	assert_int_equal(fake.promote_calls, 2);
	assert_ptr_equal(fake.last_img, &fake_imgs[0]);
	free_script(&s);
}

static void test_images_hitset_reload_unknown(void **state)
{
	struct script s = {
		.send = "images\nhitset dump\nreload\nreload\nfrobnicate\n\nhelp\nstatus extra\n",
		.expect_lines = 8};
	(void)state;
	run_script(&s);
	assert_has(s.answers[0], "{\"name\": \"vm1\", \"size\": 10737418240, \"ready\": true, "
				 "\"state\": \"ready\", \"read_only\": true, \"in_config\": true}");
	assert_has(s.answers[0], "{\"name\": \"vm2\", \"size\": 1048576, \"ready\": false, "
				 "\"state\": \"loading\", \"read_only\": false, \"in_config\": false}");
	assert_string_equal(s.answers[1],
			    "{\"hitsets\": [{\"set\": \"current\", \"start_ms\": 2000, \"end_ms\": null, "
			    "\"inserts\": 3, \"unique\": 3, \"capacity\": 1024, \"bits\": 6400, \"k\": 4, "
			    "\"fpp\": 0.05, \"fill\": 0.0019, \"est_fpp\": 1.24e-11}, "
			    "{\"set\": 0, \"start_ms\": 1000, \"end_ms\": 2000, "
			    "\"inserts\": 15000, \"unique\": 5010, \"capacity\": 1024, \"bits\": 6400, "
			    "\"k\": 4, \"fpp\": 0.05, \"fill\": 0.99, \"est_fpp\": 0.961}]}");
	assert_string_equal(s.answers[2],
			    "{\"ok\": true, \"restart_pending\": [\"listen\", \"image.vm2 (removed)\"]}");
	assert_string_equal(s.answers[3], "{\"error\": \"tierd.conf:7: [tier] bad: nope\"}");
	assert_has(s.answers[4], "unknown command 'frobnicate'");
	assert_has(s.answers[5], "empty command");
	assert_has(s.answers[6], "\"config set KEY VALUE\"");
	assert_has(s.answers[7], "usage: status");
	assert_int_equal(reload_calls, 2);
	free_script(&s);
}

static void test_overlong_line_closes_connection(void **state)
{
	static char big[10000];
	struct script s = {.send = big, .expect_lines = 1, .want_eof = true};
	(void)state;
	memset(big, 'a', sizeof(big) - 1);
	run_script(&s);
	assert_has(s.answers[0], "command line too long");
	assert_true(s.eof);
	free_script(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_socket_mode_stale_and_live, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status_and_perf_dump, setup, teardown),
		cmocka_unit_test_setup_teardown(test_perf_per_image_and_schema, setup, teardown),
		cmocka_unit_test_setup_teardown(test_invalid_utf8_gives_valid_json, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ceph_protocol, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_show_get_set, setup, teardown),
		cmocka_unit_test_setup_teardown(test_set_params_hook_error_passes_through, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_flush_evict_promote, setup, teardown),
		cmocka_unit_test_setup_teardown(test_images_hitset_reload_unknown, setup, teardown),
		cmocka_unit_test_setup_teardown(test_overlong_line_closes_connection, setup, teardown),
	};
	return cmocka_run_group_tests_name("admin", tests, NULL, NULL);
}
