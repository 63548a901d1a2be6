# SPDX-License-Identifier: MIT
# Shared by the data-path benchmark scripts (bench-nbdkit.sh) and the
# device-model A/B scripts (bench-scan.sh, bench-phase.sh).  Source it.

# bench_model_conf DIR SIZE TARGET BASE_PROFILE CACHE_PROFILE [TIER_LINES]:
# write DIR/tierd.conf for a tierd on the local backend with those device
# models, pools in DIR/data, NBD on DIR/nbd.sock, admin socket
# DIR/tierd.asok, target_max_bytes TARGET, one image vol0 of SIZE;
# TIER_LINES go into [tier].
bench_model_conf() {
	cat > "$1/tierd.conf" <<CFG
[global]
backend = local
listen = unix:$1/nbd.sock
admin_socket = $1/tierd.asok
log_level = warn
[local]
data_dir = $1/data
base_profile = $4
cache_profile = $5
[tier]
target_max_bytes = $3
${6:-}
[image.vol0]
size = $2
CFG
}

# bench_all_hit_conf DIR SIZE [LINES]: write DIR/tierd.conf for a tierd
# whose every request hits: local backend, pools in DIR/data (tmpfs in the
# scripts), no device model, a 4 GiB target (the image is written once, so
# every block is cached), NBD on DIR/nbd.sock, admin socket DIR/tierd.asok,
# one image vol0 of SIZE; LINES go into [global] (threads, busy_poll_us,
# BENCH_TIERD_EXTRA).
bench_all_hit_conf() {
	cat > "$1/tierd.conf" <<CFG
# written by tools/bench/bench-lib.sh (bench_all_hit_conf)
[global]
backend = local
listen = unix:$1/nbd.sock
admin_socket = $1/tierd.asok
log_level = warn
${3:-}

[local]
data_dir = $1/data
base_profile = none
cache_profile = none

[tier]
target_max_bytes = 4G
cache_target_dirty_ratio = 0.9
cache_target_dirty_high_ratio = 0.95
cache_target_full_ratio = 0.95

[image.vol0]
size = $2
CFG
}
