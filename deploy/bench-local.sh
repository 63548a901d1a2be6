#!/bin/bash
# SPDX-License-Identifier: MIT
# Seed 004 on the local backend: 4 KiB random writes, zipf:1.1, over an image
# 4x the cache target, at QD 1/2/4/8/16, against three tier configurations
# started one after the other with a fresh data directory each:
#   a) promote:  write_miss = promote, recency 0, no promotion throttle
#                (Ceph without proxy write; tier-sim's promote-always preset)
#   b) proxy:    write_miss = proxy, recency 1, hitset eviction, the default
#                promotion throttle (Ceph's 5 MiB/s, 25/s; tier-sim's ceph)
#   c) extent:   promote_granularity = extent (tierd's best, tier-sim preset)
# Base pool = `hdd` device model, cache pool = `ssd` (docs/DEVICE-MODEL.md).
# Prints one table per configuration and a side-by-side summary; CSV and JSON
# per configuration land in $BENCH_OUT.  The numbers go in docs/BENCHMARKS.md.
#
# Environment (defaults in brackets): BUILD_DIR [./build-bench, configured as
# a release build if missing], BENCH_SIZE [4G], BENCH_TARGET [1G],
# BENCH_RUNTIME [25] seconds per QD, BENCH_RAMP [0], BENCH_QD [1,2,4,8,16],
# BENCH_CONFIGS [promote,proxy,extent], BENCH_OUT [a new /tmp dir],
# BENCH_BASE_WRITE_LATENCY_US [unset = the hdd profile's 5000].
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-bench}
SIZE=${BENCH_SIZE:-4G}
TARGET=${BENCH_TARGET:-1G}
RUNTIME=${BENCH_RUNTIME:-25}
RAMP=${BENCH_RAMP:-0}
QDS=${BENCH_QD:-1,2,4,8,16}
CONFIGS=${BENCH_CONFIGS:-promote,proxy,extent}
OUT=${BENCH_OUT:-$(mktemp -d /tmp/tierd-bench.XXXXXX)}
mkdir -p "$OUT"

if [ ! -f "$BUILD/build.ninja" ]; then
	meson setup "$BUILD" "$ROOT" --buildtype=release >/dev/null
fi
ninja -C "$BUILD" daemon/tierd tools/tier-bench >/dev/null
TIERD=$BUILD/daemon/tierd
BENCH=$BUILD/tools/tier-bench

STATE=
PID=
cleanup() {
	if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
		kill -KILL "$PID" 2>/dev/null || true
	fi
	[ -z "$STATE" ] || rm -rf "$STATE"
}
trap cleanup EXIT

tier_section() {
	case "$1" in
	promote) printf '%s\n' "write_miss = promote" "promote_granularity = object" \
		"min_write_recency_for_promote = 0" "min_read_recency_for_promote = 0" \
		"promote_max_bytes_sec = 0" "promote_max_objects_sec = 0" ;;
	proxy) printf '%s\n' "write_miss = proxy" "promote_granularity = object" \
		"min_write_recency_for_promote = 1" "min_read_recency_for_promote = 1" ;;
	extent) printf '%s\n' "promote_granularity = extent" \
		"min_write_recency_for_promote = 1" "min_read_recency_for_promote = 1" ;;
	*) echo "unknown configuration $1 (promote, proxy, extent)" >&2; exit 2 ;;
	esac
}

run_config() {
	local name=$1 rc=0
	STATE=$(mktemp -d /tmp/tierd-bench-state.XXXXXX)
	cat > "$STATE/tierd.conf" <<CFG
# written by deploy/bench-local.sh, configuration $name
[global]
backend = local
listen = unix:$STATE/nbd.sock
admin_socket = $STATE/tierd.asok
log_level = warn

[local]
data_dir = $STATE/data
base_profile = hdd
cache_profile = ssd
${BENCH_BASE_WRITE_LATENCY_US:+base_write_latency_us = $BENCH_BASE_WRITE_LATENCY_US}

[tier]
cache_mode = writeback
target_max_bytes = $TARGET
cache_target_dirty_ratio = 0.4
cache_target_full_ratio = 0.8
hit_set_count = 4
hit_set_period = 60s
evict_policy = hitset
$(tier_section "$name")

[image.vol0]
size = $SIZE
CFG
	cp "$STATE/tierd.conf" "$OUT/$name.conf"
	"$TIERD" --config "$STATE/tierd.conf" 2> "$OUT/$name.tierd.log" &
	PID=$!
	for _ in $(seq 1 300); do
		[ -S "$STATE/nbd.sock" ] && [ -S "$STATE/tierd.asok" ] && break
		kill -0 "$PID" 2>/dev/null || { cat "$OUT/$name.tierd.log"; exit 1; }
		sleep 0.1
	done
	printf '\n== %s (%s)\n' "$name" "$(tier_section "$name" | paste -sd, -)"
	"$BENCH" --uri "nbd+unix:///vol0?socket=$STATE/nbd.sock" \
		--admin "$STATE/tierd.asok" --qd "$QDS" --runtime "$RUNTIME" --ramp "$RAMP" \
		--dist zipf:1.1 --rw write --bs 4k --seed 1 --label "$name" \
		--csv "$OUT/$name.csv" --json "$OUT/$name.json" | tee "$OUT/$name.txt"
	# stop: SIGTERM drains; a cache full of dirty objects is not flushed first
	kill -TERM "$PID"
	for _ in $(seq 1 300); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$PID" 2>/dev/null; then
		echo "tierd ($name) still running 30 s after SIGTERM; killing it" >&2
		kill -KILL "$PID"
	fi
	wait "$PID" || rc=$?
	PID=
	[ "$rc" -eq 0 ] || echo "tierd ($name) exited with status $rc" >&2
	rm -rf "$STATE"
	STATE=
}

echo "machine: $(nproc) CPUs, $(uname -sr), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "image $SIZE, cache target $TARGET, zipf:1.1 4 KiB randwrite, ${RUNTIME}s per QD ($QDS)"
IFS=, read -ra names <<< "$CONFIGS"
for n in "${names[@]}"; do
	run_config "$n"
done

# side by side: one block per metric, one row per configuration, one column per QD
printf '\n== summary (%s)\n' "$OUT"
for n in "${names[@]}"; do cat "$OUT/$n.csv"; done | awk -F, '
	$1 == "label" { for (i = 1; i <= NF; i++) col[$i] = i; next }
	{ if (!($1 in seen)) { seen[$1] = 1; order[++nl] = $1 }
	  if (!($2 in qseen)) { qseen[$2] = 1; qd[++nq] = $2 }
	  for (m in col) v[$1, $2, m] = $col[m] }
	END {
		split("iops lat_mean_ms lat_p99_ms promotions proxy_writes flushes evictions hit_ratio promote_b_per_client_b", ms, " ")
		fmt["iops"] = "%.0f"; fmt["hit_ratio"] = "%.3f"; fmt["promote_b_per_client_b"] = "%.2f"
		fmt["lat_mean_ms"] = "%.2f"; fmt["lat_p99_ms"] = "%.1f"
		printf "%-34s", "QD"; for (j = 1; j <= nq; j++) printf " %9s", qd[j]; printf "\n"
		for (k = 1; k in ms; k++) for (i = 1; i <= nl; i++) {
			m = ms[k]; f = (m in fmt) ? fmt[m] : "%.0f"
			printf "%-34s", m " (" order[i] ")"
			for (j = 1; j <= nq; j++) {
				x = v[order[i], qd[j], m]
				printf " %9s", x == "" ? "-" : sprintf(f, x)
			}
			printf "\n"
		}
	}'
