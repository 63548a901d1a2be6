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
};

static struct tier_engine fake;
static struct tier_image fake_imgs[2] = {{"vm1", 10ull << 30, 1, true}, {"vm2", 1ull << 20, 0, false}};

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

	if (fd >= 0 && send(fd, s->send, strlen(s->send), MSG_NOSIGNAL) >= 0) {
		while (s->n_answers < s->expect_lines) {
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
	assert_has(s.answers[0], "\"read_hit_ratio\": 0.9000");
	assert_has(s.answers[0], "\"write_hit_ratio\": null");   /* no writes yet */
	assert_has(s.answers[0], "\"full_ratio\": 0.2500");
	assert_has(s.answers[0], "\"flush_mode\": \"low\"");
	assert_has(s.answers[0], "\"evict_mode\": \"full\"");
	assert_has(s.answers[0], "\"dirty_bytes\": 12345");
	assert_has(s.answers[0], "\"images\": 2");
	assert_has(s.answers[0], "\"cache_mode\": \"writeback\"");
	assert_has(s.answers[1], "\"hitset_archives\": 7");
	assert_has(s.answers[1], "\"gauges\": {");
	assert_has(s.answers[1], "\"write\": {\"count\": 100");
	assert_has(s.answers[1], "\"max\": 50000");
#define HAS_COUNTER(n) assert_has(s.answers[1], "\"" #n "\": ");
	TIER_COUNTERS(HAS_COUNTER)
	TIER_GAUGES(HAS_COUNTER)
#undef HAS_COUNTER
	free_script(&s);
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
			    "{\"hitsets\": [{\"set\":\"current\",\"start_ms\":2000,\"end_ms\":null,"
			    "\"inserts\":3,\"unique\":3,\"capacity\":1024,\"bits\":6400,\"k\":4,"
			    "\"fpp\":0.05,\"fill\":0.0019,\"est_fpp\":1.24e-11},"
			    "{\"set\":0,\"start_ms\":1000,\"end_ms\":2000,"
			    "\"inserts\":15000,\"unique\":5010,\"capacity\":1024,\"bits\":6400,\"k\":4,"
			    "\"fpp\":0.05,\"fill\":0.9900,\"est_fpp\":0.961}]}");
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
		cmocka_unit_test_setup_teardown(test_config_show_get_set, setup, teardown),
		cmocka_unit_test_setup_teardown(test_set_params_hook_error_passes_through, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_flush_evict_promote, setup, teardown),
		cmocka_unit_test_setup_teardown(test_images_hitset_reload_unknown, setup, teardown),
		cmocka_unit_test_setup_teardown(test_overlong_line_closes_connection, setup, teardown),
	};
	return cmocka_run_group_tests_name("admin", tests, NULL, NULL);
}
