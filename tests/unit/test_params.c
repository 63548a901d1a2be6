/* SPDX-License-Identifier: MIT */
/*
 * test_params.c - the [tier] parameter table: unit parsers, defaults, set/get
 * round trips, ranges, enum values, cross-field checks and liveness.
 */
#undef NDEBUG
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tier/params.h"

static uint64_t bytes(const char *s)
{
	uint64_t v = 0;
	assert_int_equal(tier_parse_bytes(s, &v), 0);
	return v;
}

static uint64_t ms(const char *s)
{
	uint64_t v = 0;
	assert_int_equal(tier_parse_ms(s, &v), 0);
	return v;
}

static void test_parse_bytes_units(void **state)
{
	uint64_t v;
	(void)state;
	assert_int_equal(bytes("4096"), 4096);
	assert_int_equal(bytes("4K"), 4096);
	assert_int_equal(bytes("4k"), 4096);
	assert_int_equal(bytes("4KiB"), 4096);
	assert_int_equal(bytes("4KB"), 4096);
	assert_int_equal(bytes("1.5M"), 1572864);
	assert_int_equal(bytes("10G"), 10ull << 30);
	assert_int_equal(bytes("2T"), 2ull << 40);
	assert_int_equal(bytes(" 8M "), 8ull << 20);
	assert_int_equal(bytes("0"), 0);
	assert_int_equal(tier_parse_bytes("", &v), -EINVAL);
	assert_int_equal(tier_parse_bytes("-1", &v), -EINVAL);
	assert_int_equal(tier_parse_bytes("4X", &v), -EINVAL);
	assert_int_equal(tier_parse_bytes("4K4", &v), -EINVAL);
	assert_int_equal(tier_parse_bytes("1.5", &v), -EINVAL);   /* not whole bytes */
	assert_int_equal(tier_parse_bytes("16E", &v), -ERANGE);
	assert_int_equal(tier_parse_bytes("99999999999999999999", &v), -ERANGE);
	assert_int_equal(tier_parse_bytes(NULL, &v), -EINVAL);
}

static void test_parse_ms_units(void **state)
{
	uint64_t v;
	(void)state;
	assert_int_equal(ms("600"), 600000);   /* bare = seconds, as Ceph */
	assert_int_equal(ms("500ms"), 500);
	assert_int_equal(ms("10s"), 10000);
	assert_int_equal(ms("1.5s"), 1500);
	assert_int_equal(ms("5m"), 300000);
	assert_int_equal(ms("5min"), 300000);
	assert_int_equal(ms("1h"), 3600000);
	assert_int_equal(ms("1d"), 86400000);
	assert_int_equal(ms("0"), 0);
	assert_int_equal(tier_parse_ms("0.5ms", &v), -EINVAL);
	assert_int_equal(tier_parse_ms("10 fortnights", &v), -EINVAL);
	assert_int_equal(tier_parse_ms("s", &v), -EINVAL);
}

static void test_parse_u64_and_bool(void **state)
{
	uint64_t v;
	int b = -1;
	(void)state;
	assert_int_equal(tier_parse_u64("42", &v), 0);
	assert_int_equal(v, 42);
	assert_int_equal(tier_parse_u64("18446744073709551615", &v), 0);
	assert_true(v == UINT64_MAX);
	assert_int_equal(tier_parse_u64("18446744073709551616", &v), -ERANGE);
	assert_int_equal(tier_parse_u64("4K", &v), -EINVAL);
	assert_int_equal(tier_parse_u64("1.0", &v), -EINVAL);
	assert_int_equal(tier_parse_u64("-3", &v), -EINVAL);
	const char *t[] = {"true", "YES", "on", "1"}, *f[] = {"false", "No", "off", "0"};
	for (int i = 0; i < 4; i++) {
		assert_int_equal(tier_parse_bool(t[i], &b), 0);
		assert_int_equal(b, 1);
		assert_int_equal(tier_parse_bool(f[i], &b), 0);
		assert_int_equal(b, 0);
	}
	assert_int_equal(tier_parse_bool("maybe", &b), -EINVAL);
}

static void test_defaults_match_table(void **state)
{
	struct tier_params p;
	char err[256];
	(void)state;
	tier_params_default(&p);
	assert_int_equal(p.cache_mode, TIER_MODE_WRITEBACK);
	assert_int_equal(p.promote_granularity, TIER_GRAN_EXTENT);
	assert_int_equal(p.evict_policy, TIER_EVICT_LRU);
	assert_int_equal(p.write_miss, TIER_WMISS_PROXY);
	assert_int_equal(p.min_write_recency_for_promote, 0);
	assert_int_equal(p.min_read_recency_for_promote, 1);
	assert_true(p.target_max_bytes == 1ull << 30);
	assert_int_equal(p.hit_set_count, 4);
	assert_int_equal(p.hit_set_period, 60000);
	assert_int_equal(p.object_size, 4u << 20);
	assert_int_equal(p.agent_max_ops, 4);
	assert_true(p.cache_target_dirty_ratio == 0.4);
	assert_true(p.cache_target_full_ratio == 0.8);
	assert_int_equal(tier_params_check(&p, err, sizeof(err)), 0);
}

/* Presets: tierd is the defaults; ceph and promote-always are Ceph's behaviour. */
static void test_presets(void **state)
{
	struct tier_params d, p;
	char err[256];
	const char *what = NULL;
	size_t n = 0;
	(void)state;
	tier_params_default(&d);
	p = d;
	assert_int_equal(tier_params_preset(&p, "tierd", err, sizeof(err)), 0);
	assert_memory_equal(&p, &d, sizeof(p));
	assert_int_equal(tier_params_preset(&p, "ceph", err, sizeof(err)), 0);
	assert_int_equal(p.promote_granularity, TIER_GRAN_OBJECT);
	assert_int_equal(p.write_miss, TIER_WMISS_PROXY);
	assert_int_equal(p.min_write_recency_for_promote, 1);
	assert_int_equal(p.min_read_recency_for_promote, 1);
	assert_true(p.promote_max_bytes_sec == 5ull << 20);
	assert_int_equal(p.promote_max_objects_sec, 25);
	assert_true(p.target_max_bytes == d.target_max_bytes);   /* sizes are the operator's */
	assert_int_equal(tier_params_check(&p, err, sizeof(err)), 0);
	p = d;
	assert_int_equal(tier_params_preset(&p, "promote-always", err, sizeof(err)), 0);
	assert_int_equal(p.promote_granularity, TIER_GRAN_OBJECT);
	assert_int_equal(p.write_miss, TIER_WMISS_PROMOTE);
	assert_int_equal(p.min_read_recency_for_promote, 0);
	assert_int_equal(p.promote_max_bytes_sec, 0);
	assert_int_equal(tier_params_preset(&p, "bogus", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "allowed: tierd, ceph, promote-always"));
	while (tier_params_preset_info(n, &what))
		n++;
	assert_int_equal(n, 3);
	assert_non_null(what);
}

static void test_set_get_round_trip(void **state)
{
	struct tier_params p;
	char err[1024], v[64];
	(void)state;
	tier_params_default(&p);
	assert_int_equal(tier_params_set(&p, "target_max_bytes", "10G", err, sizeof(err)), 0);
	assert_true(p.target_max_bytes == 10ull << 30);
	assert_int_equal(tier_params_get(&p, "target_max_bytes", v, sizeof(v)), 0);
	assert_string_equal(v, "10G");
	assert_int_equal(tier_params_set(&p, "hit_set_period", "600", err, sizeof(err)), 0);
	assert_int_equal(p.hit_set_period, 600000);
	assert_int_equal(tier_params_get(&p, "hit_set_period", v, sizeof(v)), 0);
	assert_string_equal(v, "10m");
	assert_int_equal(tier_params_set(&p, "cache_min_flush_age", "1500ms", err, sizeof(err)), 0);
	tier_params_get(&p, "cache_min_flush_age", v, sizeof(v));
	assert_string_equal(v, "1500ms");
	assert_int_equal(tier_params_set(&p, "cache_target_full_ratio", "0.9", err, sizeof(err)), 0);
	tier_params_get(&p, "cache_target_full_ratio", v, sizeof(v));
	assert_string_equal(v, "0.9");
	assert_int_equal(tier_params_set(&p, "cache_target_dirty_ratio", "50%", err, sizeof(err)), 0);
	assert_true(p.cache_target_dirty_ratio == 0.5);
	tier_params_get(&p, "hit_set_count", v, sizeof(v));
	assert_string_equal(v, "4");
}

struct collect {
	char keys[64][48];
	char vals[64][64];
	int n;
};

static void collect_fn(void *arg, const char *key, const char *value)
{
	struct collect *c = arg;
	assert_true(c->n < 64);
	snprintf(c->keys[c->n], sizeof(c->keys[0]), "%s", key);
	snprintf(c->vals[c->n], sizeof(c->vals[0]), "%s", value);
	c->n++;
}

static void test_foreach_round_trips_every_key(void **state)
{
	struct tier_params p, q;
	struct collect c = {.n = 0};
	char err[1024];
	(void)state;
	tier_params_default(&p);
	p.cache_mode = TIER_MODE_READONLY;
	p.promote_granularity = TIER_GRAN_EXTENT;
	p.evict_policy = TIER_EVICT_ARC;
	p.admission = TIER_ADMIT_TINYLFU;
	p.target_max_bytes = 3ull << 30;
	p.hit_set_fpp = 0.01;
	p.cache_min_evict_age = 1234;
	tier_params_foreach(&p, collect_fn, &c);
	assert_int_equal(c.n, 6 + 22 + 4);   /* enums + u64 + ratios */
	assert_string_equal(c.keys[0], "cache_mode");
	assert_string_equal(c.vals[0], "readonly");
	memset(&q, 0xab, sizeof(q));
	tier_params_default(&q);
	for (int i = 0; i < c.n; i++)
		assert_int_equal(tier_params_set(&q, c.keys[i], c.vals[i], err, sizeof(err)), 0);
	assert_memory_equal(&p, &q, sizeof(p));
}

static void test_enum_values(void **state)
{
	struct tier_params p;
	char err[1024];
	(void)state;
	tier_params_default(&p);
	const char *modes[] = {"writeback", "readproxy", "proxy", "readonly", "none"};
	for (int i = 0; i < 5; i++) {
		assert_int_equal(tier_params_set(&p, "cache_mode", modes[i], err, sizeof(err)), 0);
		assert_int_equal(p.cache_mode, i);
	}
	assert_int_equal(tier_params_set(&p, "cache_mode", "forward", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "writeback|readproxy|proxy|readonly|none"));
	assert_int_equal(p.cache_mode, TIER_MODE_NONE);   /* unchanged on error */
	assert_int_equal(tier_params_set(&p, "promote_granularity", "extent", err, sizeof(err)), 0);
	assert_int_equal(p.promote_granularity, TIER_GRAN_EXTENT);
	assert_int_equal(tier_params_set(&p, "promote_granularity", "block", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "object|extent"));
	assert_int_equal(tier_params_set(&p, "evict_policy", "s3fifo", err, sizeof(err)), 0);
	assert_int_equal(p.evict_policy, TIER_EVICT_S3FIFO);
	assert_int_equal(tier_params_set(&p, "evict_policy", "lru", err, sizeof(err)), 0);
	assert_int_equal(p.evict_policy, TIER_EVICT_LRU);
	assert_int_equal(tier_params_set(&p, "evict_policy", "arc", err, sizeof(err)), 0);
	assert_int_equal(p.evict_policy, TIER_EVICT_ARC);
	assert_int_equal(tier_params_set(&p, "evict_policy", "lirs", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "hitset|s3fifo|lru|arc"));
	assert_int_equal(p.admission, TIER_ADMIT_RECENCY);   /* the default */
	assert_int_equal(tier_params_set(&p, "admission", "tinylfu", err, sizeof(err)), 0);
	assert_int_equal(p.admission, TIER_ADMIT_TINYLFU);
	assert_int_equal(tier_params_set(&p, "admission", "lfu", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "recency|tinylfu"));
	assert_int_equal(tier_params_set(&p, "hit_set_type", "bloom", err, sizeof(err)), 0);
	assert_int_equal(tier_params_set(&p, "hit_set_type", "explicit_hash", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "allowed: bloom"));
}

static void test_ranges_and_errors(void **state)
{
	struct tier_params p;
	char err[1024];
	(void)state;
	tier_params_default(&p);
	assert_int_equal(tier_params_set(&p, "hit_set_count", "65", err, sizeof(err)), -ERANGE);
	assert_non_null(strstr(err, "allowed: 1..64"));
	assert_int_equal(p.hit_set_count, 4);
	assert_int_equal(tier_params_set(&p, "hit_set_count", "0", err, sizeof(err)), -ERANGE);
	assert_int_equal(tier_params_set(&p, "hit_set_count", "four", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "bad value 'four'"));
	assert_int_equal(tier_params_set(&p, "object_size", "128M", err, sizeof(err)), -ERANGE);
	assert_non_null(strstr(err, "4K..64M"));
	assert_int_equal(tier_params_set(&p, "cache_target_full_ratio", "1.5", err, sizeof(err)), -ERANGE);
	assert_non_null(strstr(err, "0..1"));
	assert_int_equal(tier_params_set(&p, "hit_set_fpp", "0", err, sizeof(err)), -ERANGE);
	assert_int_equal(tier_params_set(&p, "hit_set_period", "50ms", err, sizeof(err)), -ERANGE);
	assert_non_null(strstr(err, "100ms..1d"));
	assert_int_equal(tier_params_set(&p, "target_max_bytes", "1Q", err, sizeof(err)), -EINVAL);
	assert_int_equal(tier_params_set(&p, "no_such_key", "1", err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "target_max_bytes"));
	assert_true(strncmp(err, "unknown tier parameter (allowed: cache_mode, hit_set_type, ", 59) == 0);
	assert_int_equal(err[strlen(err) - 1], ')');
	char v[8];
	assert_int_equal(tier_params_get(&p, "no_such_key", v, sizeof(v)), -ENOENT);
	/* a short buffer gets the message cut, NUL-terminated */
	memset(v, 'x', sizeof(v));
	assert_int_equal(tier_params_set(&p, "no_such_key", "1", v, sizeof(v)), -ENOENT);
	assert_string_equal(v, "unknown");
	memset(v, 'x', sizeof(v));
	assert_int_equal(tier_params_set(&p, "object_size", "3", v, sizeof(v)), -ERANGE);
	assert_string_equal(v, "out of ");
}

static void test_cross_checks(void **state)
{
	struct tier_params p;
	char err[512];
	(void)state;

	tier_params_default(&p);
	p.cache_target_dirty_ratio = 0.7;
	p.cache_target_dirty_high_ratio = 0.6;
	assert_int_equal(tier_params_check(&p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "cache_target_dirty_high_ratio"));

	tier_params_default(&p);
	p.extent_size = 8192;
	p.object_size = 4096;
	assert_int_equal(tier_params_check(&p, err, sizeof(err)), -EINVAL);
	tier_params_default(&p);
	p.object_size = 3 << 20;
	assert_int_equal(tier_params_check(&p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "power of two"));

	tier_params_default(&p);
	p.agent_max_low_ops = 8;
	p.agent_max_ops = 4;
	assert_int_equal(tier_params_check(&p, err, sizeof(err)), -EINVAL);

	tier_params_default(&p);
	p.min_read_recency_for_promote = 5;   /* count 4 + current */
	assert_int_equal(tier_params_check(&p, err, sizeof(err)), 0);
	p.min_read_recency_for_promote = 6;
	assert_int_equal(tier_params_check(&p, err, sizeof(err)), -EINVAL);

	tier_params_default(&p);
	p.hit_set_search_last_n = 5;
	assert_int_equal(tier_params_check(&p, err, sizeof(err)), -EINVAL);

	tier_params_default(&p);
	p.target_max_bytes = 0;
	assert_int_equal(tier_params_check(&p, err, sizeof(err)), -EINVAL);
	p.target_max_objects = 1000;
	assert_int_equal(tier_params_check(&p, err, sizeof(err)), 0);

	tier_params_default(&p);
	p.hit_set_count = 100;   /* set directly, bypassing tier_params_set */
	assert_int_equal(tier_params_check(&p, err, sizeof(err)), -ERANGE);
	tier_params_default(&p);
	p.cache_mode = (enum tier_cache_mode)9;
	assert_int_equal(tier_params_check(&p, err, sizeof(err)), -EINVAL);
}

static void test_is_live(void **state)
{
	(void)state;
	assert_int_equal(tier_params_is_live("object_size"), 0);
	assert_int_equal(tier_params_is_live("extent_size"), 0);
	assert_int_equal(tier_params_is_live("target_max_bytes"), 1);
	assert_int_equal(tier_params_is_live("cache_mode"), 1);
	assert_int_equal(tier_params_is_live("nope"), -ENOENT);
}

/*
 * tier_params_info (what the man page prints) walks the same keys as
 * tier_params_foreach, in its order, with the defaults' text, an allowed
 * text that tier_params_set's error names too, and tier_params_is_live.
 */
static void test_info_matches_the_table(void **state)
{
	struct tier_params p, q;
	struct collect c = {.n = 0};
	struct tier_param_info in;
	char err[1024], buf[32];
	size_t i;
	(void)state;
	tier_params_default(&p);
	tier_params_foreach(&p, collect_fn, &c);
	for (i = 0; tier_params_info(i, &in) == 0; i++) {
		assert_true(i < (size_t)c.n);
		assert_string_equal(in.key, c.keys[i]);
		assert_string_equal(in.def, c.vals[i]);
		assert_int_equal(in.live, tier_params_is_live(in.key));
		q = p;
		assert_int_equal(tier_params_set(&q, in.key, "no-such-value", err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, in.allowed));
	}
	assert_int_equal(i, (size_t)c.n);
	assert_int_equal(tier_params_info(i, &in), -ENOENT);
	tier_format_bytes(4ull << 20, buf, sizeof(buf));
	assert_string_equal(buf, "4M");
	tier_format_ms(60000, buf, sizeof(buf));
	assert_string_equal(buf, "1m");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_bytes_units),
		cmocka_unit_test(test_parse_ms_units),
		cmocka_unit_test(test_parse_u64_and_bool),
		cmocka_unit_test(test_defaults_match_table),
		cmocka_unit_test(test_presets),
		cmocka_unit_test(test_set_get_round_trip),
		cmocka_unit_test(test_foreach_round_trips_every_key),
		cmocka_unit_test(test_enum_values),
		cmocka_unit_test(test_ranges_and_errors),
		cmocka_unit_test(test_cross_checks),
		cmocka_unit_test(test_is_live),
		cmocka_unit_test(test_info_matches_the_table),
	};
	return cmocka_run_group_tests_name("params", tests, NULL, NULL);
}
