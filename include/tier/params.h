/* SPDX-License-Identifier: MIT */
/*
 * tier/params.h - the tunable tier parameters ([tier] section), their
 * defaults, ranges and units, in one table shared by the config parser,
 * `tierctl config set` and the engine.  Names follow Ceph's pool options.
 */
#ifndef TIER_PARAMS_H
#define TIER_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tier_cache_mode {
	TIER_MODE_WRITEBACK = 0,
	TIER_MODE_READPROXY,
	TIER_MODE_PROXY,
	TIER_MODE_READONLY,
	TIER_MODE_NONE,
};

/*
 * What a promotion covers: object - the whole object, read from base (Ceph);
 * extent - only the extents written (extent_size each), nothing read from
 * base on a write miss (the default).
 */
enum tier_granularity { TIER_GRAN_OBJECT = 0, TIER_GRAN_EXTENT };

/* hitset: Ceph's temperature; s3fifo; lru; arc (ghost lists).  libtier/policy*.c. */
enum tier_evict_policy { TIER_EVICT_HITSET = 0, TIER_EVICT_S3FIFO, TIER_EVICT_LRU, TIER_EVICT_ARC };

/*
 * Which rule admits a miss (libtier/decide.c tier__decide_admit):
 * recency - Ceph's: min_*_recency_for_promote over the hitsets, or the
 *           eviction policy's ghost hint;
 * tinylfu - a frequency sketch of every access (policy_sketch.c): while
 *           the cache is below cache_target_full_ratio every miss the
 *           recency rule admits is admitted; above it, only a miss whose
 *           estimated frequency exceeds that of the eviction victim.
 */
enum tier_admission { TIER_ADMIT_RECENCY = 0, TIER_ADMIT_TINYLFU };

/*
 * What an admitted write miss does in object granularity:
 * proxy   - write to base now, promote the object in the background (Ceph
 *           with proxy write, the default);
 * promote - the write waits for the whole-object promotion, then lands in
 *           the cache (Ceph before proxy write; kept for comparison).
 */
enum tier_write_miss { TIER_WMISS_PROXY = 0, TIER_WMISS_PROMOTE };

/*
 * X(name, kind, default, min, max): kind is one of
 *   U64  plain count          BYTES  size with K/M/G/T suffix
 *   MS   duration (ms, s)     RATIO  0.0 .. 1.0 (double)     ENUM handled apart
 * Durations are held in milliseconds.
 */
#define TIER_PARAMS_U(X)                                                         \
	X(target_max_bytes, BYTES, 1ull << 30, 0, UINT64_MAX)                    \
	X(target_max_objects, U64, 0, 0, UINT64_MAX)                             \
	X(cache_min_flush_age, MS, 0, 0, 86400000ull)                            \
	X(cache_min_evict_age, MS, 0, 0, 86400000ull)                            \
	X(hit_set_count, U64, 4, 1, 64)                                          \
	X(hit_set_period, MS, 60000, 100, 86400000ull)                           \
	X(min_read_recency_for_promote, U64, 1, 0, 64)                           \
	X(min_write_recency_for_promote, U64, 0, 0, 64)                          \
	X(admit_when_room, U64, 1, 0, 1)                                         \
	X(hit_set_grade_decay_rate, U64, 20, 0, 100)                             \
	X(hit_set_search_last_n, U64, 1, 0, 64)                                  \
	X(promote_max_bytes_sec, BYTES, 5ull << 20, 0, UINT64_MAX)               \
	X(promote_max_objects_sec, U64, 25, 0, UINT64_MAX)                       \
	X(agent_max_ops, U64, 4, 1, 1024)                                        \
	X(agent_max_low_ops, U64, 2, 1, 1024)                                    \
	X(agent_evict_dirty, U64, 1, 0, 1)                                       \
	X(evict_extents, U64, 2, 0, 2)                                           \
	X(fill_window, BYTES, 4ull << 10, 0, 64ull << 20)                        \
	X(fill_budget_pct, U64, 100, 0, 10000)                                   \
	X(fill_locality_pct, U64, 25, 0, 100)                                    \
	X(object_size, BYTES, 4ull << 20, 4096, 64ull << 20)                     \
	X(extent_size, BYTES, 4096, 512, 4ull << 20)

#define TIER_PARAMS_D(X)                                                         \
	X(cache_target_dirty_ratio, RATIO, 0.4, 0.0, 1.0)                        \
	X(cache_target_dirty_high_ratio, RATIO, 0.6, 0.0, 1.0)                   \
	X(cache_target_full_ratio, RATIO, 0.8, 0.0, 1.0)                         \
	X(hit_set_fpp, RATIO, 0.05, 0.000001, 0.5)

struct tier_params {
	enum tier_cache_mode cache_mode;
	enum tier_granularity promote_granularity;
	enum tier_evict_policy evict_policy;
	enum tier_write_miss write_miss;
	enum tier_admission admission;
#define TIER_P_FIELD_U(name, kind, def, lo, hi) uint64_t name;
#define TIER_P_FIELD_D(name, kind, def, lo, hi) double name;
	TIER_PARAMS_U(TIER_P_FIELD_U)
	TIER_PARAMS_D(TIER_P_FIELD_D)
#undef TIER_P_FIELD_U
#undef TIER_P_FIELD_D
};

/* Fill with defaults (the "tierd" preset). */
void tier_params_default(struct tier_params *p);
/*
 * Apply a named preset's values over p: "tierd" (the defaults), "ceph"
 * (Ceph's cache tiering: whole-object promotion, proxy write, recency 1,
 * its throttle), "promote-always" (Ceph without proxy write).  -EINVAL
 * with a message naming the presets for an unknown name.
 */
int tier_params_preset(struct tier_params *p, const char *name, char *err, size_t errlen);
/* The i-th preset's name (NULL past the end) and a one-line description. */
const char *tier_params_preset_info(size_t i, const char **what);

/*
 * Set one key from its text value ("4M", "600s", "0.4", "writeback").
 * Returns 0, -ENOENT for an unknown key, -EINVAL/-ERANGE for a bad value;
 * on error writes a message naming the allowed range into err.
 * Does not check cross-field rules (see tier_params_check).
 */
int tier_params_set(struct tier_params *p, const char *key, const char *value,
		    char *err, size_t errlen);
/* Current value of key as text. -ENOENT for an unknown key. */
int tier_params_get(const struct tier_params *p, const char *key, char *out, size_t outlen);
/* Cross-field rules (dirty <= dirty_high, object_size a multiple of extent_size, ...). */
int tier_params_check(const struct tier_params *p, char *err, size_t errlen);
/* Visit every key in table order; value as text. */
void tier_params_foreach(const struct tier_params *p,
			 void (*fn)(void *arg, const char *key, const char *value),
			 void *arg);
/* Whether a key can change on a running engine (object_size/extent_size cannot). */
int tier_params_is_live(const char *key);

/* One key of the table as text, for the man page (tools that document keys). */
struct tier_param_info {
	const char *key;      /* static */
	char def[64];         /* the default, spelt as `config show` prints it */
	char allowed[160];    /* "0..1", "4K..64M, units K/M/G/T", "lru|arc|..." */
	int live;             /* 1: a running engine takes it (reload, config set) */
};
/* The i-th key in table order: 0 and *out; -ENOENT past the last one. */
int tier_params_info(size_t i, struct tier_param_info *out);

/* Unit parsers shared by the config loader. 0 or -EINVAL/-ERANGE. */
int tier_parse_bytes(const char *s, uint64_t *out);    /* 10G, 4096, 4K, 1.5M */
int tier_parse_ms(const char *s, uint64_t *out);       /* 600 (bare = seconds, as Ceph), 500ms, 10s, 5m, 1h */
int tier_parse_u64(const char *s, uint64_t *out);
int tier_parse_bool(const char *s, int *out);          /* true/false/yes/no/on/off/1/0 */
/* Their inverses, as the parameter table prints values: 4194304 -> "4M", 60000 -> "1m". */
void tier_format_bytes(uint64_t v, char *out, size_t len);
void tier_format_ms(uint64_t v, char *out, size_t len);

#ifdef __cplusplus
}
#endif
#endif
