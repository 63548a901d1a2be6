#!/bin/bash
# SPDX-License-Identifier: MIT
# Allocator calls per request on tierd's data path: the allocator can only
# matter to a path that calls it.  tierd (local backend, pools on tmpfs, no
# device model, the whole image written once so every request hits) serves
# fio 4 KiB randread / randwrite at QD 1 and 16 over a unix socket while
# `perf stat` counts glibc's malloc, calloc, realloc and free (uprobes, added
# with `perf probe` if missing and removed again) in tierd only; the counts
# per request are printed per case.  Needs root, perf, fio.
#
# Environment (defaults in brackets): BUILD_DIR [./build-bench, a release
# build], BENCH_SIZE [256M], BENCH_RUNTIME [5] seconds per case,
# BENCH_CASES [rr1,rw1,rr16,rw16], BENCH_DIR [/dev/shm].
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/deploy/bench-lib.sh"
BUILD=${BUILD_DIR:-$ROOT/build-bench}
SIZE=${BENCH_SIZE:-256M}
RUNTIME=${BENCH_RUNTIME:-5}
CASES=${BENCH_CASES:-rr1,rw1,rr16,rw16}
DIR=${BENCH_DIR:-/dev/shm}
LIBC=$(ldconfig -p | awk '/libc\.so\.6 .*x86-64/ { print $NF; exit }')
[ -n "$LIBC" ] || LIBC=/lib/x86_64-linux-gnu/libc.so.6
for p in fio perf nbdinfo python3; do
	command -v "$p" >/dev/null || { echo "bench-allocs: $p not installed" >&2; exit 2; }
done
if [ ! -f "$BUILD/build.ninja" ]; then
	meson setup "$BUILD" "$ROOT" --buildtype=release >/dev/null
fi
ninja -C "$BUILD" daemon/tierd >/dev/null
W=$(mktemp -d "$DIR/tierd-allocs.XXXXXX")
PID=
ADDED=()
cleanup() {
	[ -z "$PID" ] || kill -KILL "$PID" 2>/dev/null || true
	for ev in "${ADDED[@]}"; do perf probe -q -d "probe_libc:$ev" || true; done
	rm -rf "$W"
}
trap cleanup EXIT
EVENTS=
for f in malloc calloc realloc free; do
	if ! perf probe -l 2>/dev/null | grep -q "probe_libc:$f "; then
		perf probe -q -x "$LIBC" -a "$f" >/dev/null
		ADDED+=("$f")
	fi
	EVENTS="$EVENTS${EVENTS:+,}probe_libc:$f"
done
bench_all_hit_conf "$W" "$SIZE"
U="nbd+unix:///vol0?socket=$W/nbd.sock"
"$BUILD/daemon/tierd" --config "$W/tierd.conf" 2> "$W/tierd.log" &
PID=$!
for _ in $(seq 1 300); do nbdinfo --size "$U" >/dev/null 2>&1 && break; sleep 0.1; done
fio --name=fill --ioengine=nbd --uri="$U" --rw=write --bs=1M --iodepth=4 --size="$SIZE" \
	--output=/dev/null
echo "machine: $(nproc) CPUs, $(uname -sr); tree $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet 2>/dev/null || echo +dirty); load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %10s %10s %10s %10s %10s %12s\n' case requests malloc calloc realloc free "calls/request"
for c in ${CASES//,/ }; do
	case "$c" in
	rr*) rw=randread ;;
	rw*) rw=randwrite ;;
	*) echo "bench-allocs: unknown case $c" >&2; exit 2 ;;
	esac
	qd=${c#r[rw]}
	perf stat -x, -e "$EVENTS" -p "$PID" -o "$W/stat.$c" &
	SPID=$!
	sleep 0.5
	fio --name="$c" --ioengine=nbd --uri="$U" --rw="$rw" --bs=4k --iodepth="$qd" \
		--size="$SIZE" --time_based --runtime="$RUNTIME" --output-format=json \
		--output="$W/fio.$c" >/dev/null
	sleep 0.2
	kill -INT "$SPID"
	wait "$SPID" || true
	python3 - "$c" "$W/fio.$c" "$W/stat.$c" <<'PY'
import json, sys
c, fj, st = sys.argv[1:4]
j = json.load(open(fj))["jobs"][0]
n = j["read"]["total_ios"] + j["write"]["total_ios"]
cnt = {}
for line in open(st):
    f = line.strip().split(",")
    if len(f) > 2 and f[2].startswith("probe_libc:"):
        cnt[f[2].split(":")[1]] = int(f[0]) if f[0].isdigit() else 0
tot = sum(cnt.values())
print("%-6s %10d %10d %10d %10d %10d %12.3f" % (c, n, cnt.get("malloc", 0), cnt.get("calloc", 0),
      cnt.get("realloc", 0), cnt.get("free", 0), tot / n if n else 0))
PY
done
kill -TERM "$PID"
wait "$PID" || true
PID=
