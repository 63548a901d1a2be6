#!/bin/bash
# SPDX-License-Identifier: MIT
# Scale of metadata: lays out a cache pool of N cached (dirty) objects on the
# local backend, then restarts tierd and times the rebuild of its map, and
# measures what the objects cost in memory.  tools/tier-mkpool lays out the
# pool through libtier's local store (object_size = extent_size = 4 KiB by
# default, a quarter each of dirty, clean, partly valid dirty and partly
# valid clean objects; nothing flushed), so its files and tier.meta records
# are what tierd writes; BENCH_LAYOUT=nbd has tierd itself lay it out
# instead (an image of N objects written once by fio in 256 KiB requests,
# all dirty: slower).  Reported: layout time; the time from exec to
# the "ready" log line (every image's map rebuilt) on restart; tierd's RSS
# with an empty pool and after the rebuild (the difference per object), and
# the engine's own figure (perf dump engine_bytes_per_object).
#
# Environment (defaults in brackets): BUILD_DIR [./build-bench, configured as
# a release build if missing], BENCH_OBJECTS [1048576], BENCH_DIR [/dev/shm]
# (the pools; N objects take N x ~5 KiB there), BENCH_KEEP [0: 1 keeps the
# laid-out pool in BENCH_DIR/tierd-meta.* for another run], BENCH_POOL [a
# pool kept by an earlier run: its directory; skips the layout],
# BENCH_OBJECT_SIZE [4096], BENCH_EXTENT_SIZE [= object size; 0: object
# mode], BENCH_LAYOUT [mkpool, or nbd], BENCH_RESTARTS [1: timed restarts],
# BENCH_VERIFY [0: 1 also reads the whole image back through NBD and checks
# every block, and checks the counts tierd reports against the layout's],
# BENCH_NICE [empty; e.g. -10 starts tierd at that nice level (root); with
# the kernel's autogroups (sched_autogroup_enabled) a nice level only ranks
# processes of one session, so the script then runs in a session of its own
# whose autogroup gets that nice level too], TIERD
# [the build's daemon/tierd; another binary to compare], TIERCTL, MKPOOL
# [the build's], BENCH_NO_BUILD [empty; 1: use TIERD, TIERCTL and MKPOOL as
# they are (the test suite)].
set -euo pipefail
# a nice level counts against other sessions only through the autogroup's
if [ -n "${BENCH_NICE:-}" ] && [ -z "${BENCH_OWN_SESSION:-}" ] &&
	[ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" = 1 ]; then
	BENCH_OWN_SESSION=1 exec setsid --wait bash "$0" "$@"
fi
if [ -n "${BENCH_OWN_SESSION:-}" ]; then
	echo "$BENCH_NICE" 2>/dev/null > /proc/self/autogroup ||
		echo "bench-metadata: could not set the session's autogroup to nice $BENCH_NICE" >&2
fi

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-bench}
N=${BENCH_OBJECTS:-1048576}
DIR=${BENCH_DIR:-/dev/shm}
if [ -z "${BENCH_NO_BUILD:-}" ]; then
	if [ ! -f "$BUILD/build.ninja" ]; then
		meson setup "$BUILD" "$ROOT" --buildtype=release >/dev/null
	fi
	ninja -C "$BUILD" daemon/tierd tools/tierctl tools/tier-mkpool >/dev/null
fi
TIERD=${TIERD:-$BUILD/daemon/tierd}
TIERCTL=${TIERCTL:-$BUILD/tools/tierctl}
MKPOOL=${MKPOOL:-$BUILD/tools/tier-mkpool}
OSZ=${BENCH_OBJECT_SIZE:-4096}
ESZ=${BENCH_EXTENT_SIZE:-$OSZ}
LAYOUT=${BENCH_LAYOUT:-mkpool}
RESTARTS=${BENCH_RESTARTS:-1}
NICE=()
[ -z "${BENCH_NICE:-}" ] || NICE=(nice -n "$BENCH_NICE")
if [ -n "${BENCH_POOL:-}" ]; then
	W=$BENCH_POOL
	LAYOUT=kept
else
	W=$(mktemp -d "$DIR/tierd-meta.XXXXXX")
fi
PID=
cleanup() {
	[ -z "$PID" ] || kill -KILL "$PID" 2>/dev/null || true
	[ "${BENCH_KEEP:-0}" = 1 ] || [ -n "${BENCH_POOL:-}" ] || rm -rf "$W"
}
trap cleanup EXIT
SIZE=$((N * OSZ))
GRAN=extent
[ "$ESZ" != 0 ] || GRAN=object
cat > "$W/tierd.conf" <<CFG
# written by tools/bench/bench-metadata.sh
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
object_size = $OSZ
extent_size = $([ "$ESZ" = 0 ] && echo "$OSZ" || echo "$ESZ")
promote_granularity = $GRAN
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
	"${NICE[@]}" "$TIERD" --config "$W/tierd.conf" > /dev/null 2> "$W/tierd.log" &
	PID=$!
	until grep -q "ready:" "$W/tierd.log"; do
		kill -0 "$PID" 2>/dev/null || { cat "$W/tierd.log" >&2; exit 1; }
		sleep 0.02
	done
	t1=$(now)
	READY=$(echo "$t1 - $t0" | bc)
	# CPU seconds tierd used so far (user + system, all threads): the
	# figure the machine's load moves least
	CPU=$(awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$PID/stat")
}

stop() {
	kill -TERM "$PID"
	wait "$PID" || true
	PID=
}

get() {   # perf dump field (a gauge or a top-level one)
	echo "$1" | python3 -c 'import json,sys; d=json.load(sys.stdin)["tierd"]; print(d[sys.argv[1]])' "$2"
}

echo "machine: $(nproc) CPUs, $(uname -sr); tree $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet 2>/dev/null || echo +dirty); $N objects of $OSZ B (extent $ESZ) on $DIR, ulimit -n $(ulimit -n), load $(cut -d' ' -f1-3 /proc/loadavg), $(cat /proc/self/autogroup 2>/dev/null || echo "no autogroup")"
if [ "$LAYOUT" = mkpool ]; then
	t0=$(now)
	nobase=--no-base   # base matters only to the read-back
	[ "${BENCH_VERIFY:-0}" != 1 ] || nobase=
	"$MKPOOL" --dir "$W/data" --image vol0 --objects "$N" --object-size "$OSZ" --extent-size "$ESZ" $nobase
	t1=$(now)
	echo "layout (tier-mkpool): $(echo "$t1 - $t0" | bc) s"
	start
	rss0=
elif [ "$LAYOUT" = nbd ]; then
	start
	rss0=$(rss_kib "$PID")
	t0=$(now)
	fio --name=layout --ioengine=nbd --uri="$U" --rw=write --bs=256k --iodepth=8 \
		--size="$SIZE" --output=/dev/null
	t1=$(now)
	echo "layout (fio through tierd): $(get "$("$TIERCTL" --socket "$W/tierd.asok" perf dump)" cached_objects) cached objects in $(echo "$t1 - $t0" | bc) s; RSS empty $rss0 KiB, after layout $(rss_kib "$PID") KiB"
else
	start
	rss0=
fi
stop
if [ -z "$rss0" ]; then   # tierd's RSS over an empty pool of the same config
	E=$(mktemp -d "$DIR/tierd-meta-empty.XXXXXX")
	sed -e "s|$W/|$E/|g" "$W/tierd.conf" > "$E/tierd.conf"
	W0=$W
	W=$E
	start
	rss0=$(rss_kib "$PID")
	stop
	rm -rf "$E"
	W=$W0
fi
for r in $(seq "$RESTARTS"); do
	start
	rss2=$(rss_kib "$PID")
	dump=$("$TIERCTL" --socket "$W/tierd.asok" perf dump)
	objs2=$(get "$dump" cached_objects)
	bpo=$(get "$dump" engine_bytes_per_object)
	echo "restart $r: ready in $READY s ($CPU s CPU) with $objs2 cached objects ($(get "$dump" dirty_objects) dirty); load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "  RSS after the rebuild $rss2 KiB: $(( (rss2 - rss0) / 1024 )) MiB over an empty pool ($rss0 KiB), $(( (rss2 - rss0) * 1024 / (objs2 ? objs2 : 1) )) bytes per object; engine_bytes_per_object $bpo ($(( bpo * objs2 / 1048576 )) MiB)"
	[ "$r" = "$RESTARTS" ] || stop
done
if [ "${BENCH_VERIFY:-0}" = 1 ]; then
	want=$("$MKPOOL" --image vol0 --objects "$N" --object-size "$OSZ" --extent-size "$ESZ" --expect)
	got="cached_objects=$(get "$dump" cached_objects) dirty_objects=$(get "$dump" dirty_objects) cached_bytes=$(get "$dump" cached_bytes) dirty_bytes=$(get "$dump" dirty_bytes)"
	if [ "$want" != "$got" ]; then
		echo "FAIL: tierd reports $got after the rebuild; the layout holds $want" >&2
		exit 1
	fi
	echo "counts: $got (as laid out)"
	nbdcopy "$U" - | "$MKPOOL" --image vol0 --objects "$N" --object-size "$OSZ" --extent-size "$ESZ" --verify -
fi
stop
