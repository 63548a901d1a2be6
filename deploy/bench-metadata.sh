#!/bin/bash
# SPDX-License-Identifier: MIT
# Scale of metadata: lays out a cache pool of N cached (dirty) objects on the
# local backend, then restarts tierd and times the rebuild of its map, and
# measures what the objects cost in memory.  The pool is laid out by tierd
# itself (object_size = 4 KiB, an image of N x 4 KiB written once by fio in
# 256 KiB requests, nothing flushed), so its files and tier.meta records are
# exactly what tierd writes.  Reported: layout time; the time from exec to
# the "ready" log line (every image's map rebuilt) on restart; tierd's RSS
# with an empty pool and after the rebuild (the difference per object), and
# the engine's own figure (perf dump engine_bytes_per_object).
#
# Environment (defaults in brackets): BUILD_DIR [./build-bench, configured as
# a release build if missing], BENCH_OBJECTS [1048576], BENCH_DIR [/dev/shm]
# (the pools; N objects take N x ~5 KiB there), BENCH_KEEP [0: 1 keeps the
# laid-out pool in BENCH_DIR/tierd-meta.* for another run].
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-bench}
N=${BENCH_OBJECTS:-1048576}
DIR=${BENCH_DIR:-/dev/shm}
if [ ! -f "$BUILD/build.ninja" ]; then
	meson setup "$BUILD" "$ROOT" --buildtype=release >/dev/null
fi
ninja -C "$BUILD" daemon/tierd tools/tierctl >/dev/null
TIERD=$BUILD/daemon/tierd
TIERCTL=$BUILD/tools/tierctl
W=$(mktemp -d "$DIR/tierd-meta.XXXXXX")
PID=
cleanup() {
	[ -z "$PID" ] || kill -KILL "$PID" 2>/dev/null || true
	[ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$W"
}
trap cleanup EXIT
SIZE=$((N * 4096))
cat > "$W/tierd.conf" <<CFG
# written by deploy/bench-metadata.sh
[global]
backend = local
listen = unix:$W/nbd.sock
admin_socket = $W/tierd.asok
log_level = info
[local]
data_dir = $W/data
base_profile = none
cache_profile = none
[tier]
object_size = 4K
extent_size = 4K
target_max_bytes = $((SIZE * 2))
cache_target_dirty_ratio = 0.9
cache_target_dirty_high_ratio = 0.95
cache_target_full_ratio = 0.95
[image.vol0]
size = $SIZE
CFG
U="nbd+unix:///vol0?socket=$W/nbd.sock"

rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
now() { date +%s.%N; }

start() {   # READY = seconds from exec to "ready"
	local t0 t1
	: > "$W/tierd.log"
	t0=$(now)
	"$TIERD" --config "$W/tierd.conf" > /dev/null 2> "$W/tierd.log" &
	PID=$!
	until grep -q "ready:" "$W/tierd.log"; do
		kill -0 "$PID" 2>/dev/null || { cat "$W/tierd.log" >&2; exit 1; }
		sleep 0.02
	done
	t1=$(now)
	READY=$(echo "$t1 - $t0" | bc)
}

stop() {
	kill -TERM "$PID"
	wait "$PID" || true
	PID=
}

echo "machine: $(nproc) CPUs, $(uname -sr); tree $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo +dirty); $N objects on $DIR, ulimit -n $(ulimit -n)"
start
rss0=$(rss_kib "$PID")
t0=$(now)
fio --name=layout --ioengine=nbd --uri="$U" --rw=write --bs=256k --iodepth=8 \
	--size="$SIZE" --output=/dev/null
t1=$(now)
rss1=$(rss_kib "$PID")
objs=$("$TIERCTL" --socket "$W/tierd.asok" perf dump | python3 -c 'import json,sys; print(json.load(sys.stdin)["gauges"]["cached_objects"])')
echo "layout: $objs cached objects in $(echo "$t1 - $t0" | bc) s; RSS empty $rss0 KiB, after layout $rss1 KiB"
stop
start
rss2=$(rss_kib "$PID")
dump=$("$TIERCTL" --socket "$W/tierd.asok" perf dump)
objs2=$(echo "$dump" | python3 -c 'import json,sys; print(json.load(sys.stdin)["gauges"]["cached_objects"])')
bpo=$(echo "$dump" | python3 -c 'import json,sys; print(json.load(sys.stdin)["engine_bytes_per_object"])')
echo "restart: ready in $READY s with $objs2 cached objects"
echo "RSS after the rebuild $rss2 KiB: $(( (rss2 - rss0) / 1024 )) MiB over an empty pool, $(( (rss2 - rss0) * 1024 / (objs2 ? objs2 : 1) )) bytes per object; engine_bytes_per_object $bpo ($(( bpo * objs2 / 1048576 )) MiB)"
stop
