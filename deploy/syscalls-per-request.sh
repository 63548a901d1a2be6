#!/bin/bash
# SPDX-License-Identifier: MIT
# System calls per request, tierd against `nbdkit file`: both servers up side
# by side (all hits, pools and nbdkit's file on tmpfs, no device model, as
# deploy/bench-nbdkit.sh), each image written once, then for each case one
# fio run per server under `strace -c -f -p` (every thread); the table gives
# each system call's count divided by the requests fio completed (calls
# below 0.01 per request left out).  strace slows both servers down: the
# counts are the figure, not the IOPS.
#
# Usage: deploy/syscalls-per-request.sh [CASE...]   (rr1 rw1 rr16 rw16 ...;
# default rr1 rw1 rw16).  Environment: BUILD_DIR [./build-rel], TIERD [the
# build's daemon/tierd], BENCH_THREADS [1: tierd's threads], BENCH_RUNTIME
# [3] seconds per run, BENCH_SIZE [256M], BENCH_OUT [a new /tmp dir].
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/deploy/bench-lib.sh"
BUILD=${BUILD_DIR:-$ROOT/build-rel}
TIERD=${TIERD:-$BUILD/daemon/tierd}
SIZE=${BENCH_SIZE:-256M}
RUNTIME=${BENCH_RUNTIME:-3}
[ $# -gt 0 ] || set -- rr1 rw1 rw16
for p in fio nbdkit nbdinfo strace python3; do
	command -v "$p" >/dev/null || { echo "syscalls-per-request: $p not installed" >&2; exit 2; }
done
W=$(mktemp -d /dev/shm/tierd-sys.XXXXXX)
OUT=${BENCH_OUT:-$(mktemp -d /tmp/tierd-sys.XXXXXX)}
mkdir -p "$OUT"
TP=
NP=
cleanup() { for p in $TP $NP; do kill -KILL "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$W"; }
trap cleanup EXIT
bench_all_hit_conf "$W" "$SIZE" "threads = ${BENCH_THREADS:-1}"
"$TIERD" --config "$W/tierd.conf" 2> "$OUT/tierd.log" &
TP=$!
truncate -s "$SIZE" "$W/img"
nbdkit --exit-with-parent -f -U "$W/nbdkit.sock" file "$W/img" 2> "$OUT/nbdkit.log" &
NP=$!
TU="nbd+unix:///vol0?socket=$W/nbd.sock"
NU="nbd+unix://?socket=$W/nbdkit.sock"
for u in "$TU" "$NU"; do
	for _ in $(seq 1 100); do nbdinfo --size "$u" >/dev/null 2>&1 && break; sleep 0.1; done
	fio --name=fill --ioengine=nbd --uri="$u" --rw=write --bs=1M --iodepth=4 --size="$SIZE" --output=/dev/null
done
echo "tree: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown), tierd threads ${BENCH_THREADS:-1}, $(nbdkit --version), load $(cut -d' ' -f1-3 /proc/loadavg)"
for c in "$@"; do
	case "$c" in rr*) rw=randread ;; rw*) rw=randwrite ;; *) echo "unknown case $c" >&2; exit 2 ;; esac
	qd=${c#r[rw]}
	for s in tierd nbdkit; do
		if [ "$s" = tierd ]; then u=$TU p=$TP; else u=$NU p=$NP; fi
		strace -c -f -p "$p" -o "$OUT/$s.$c.strace" 2>/dev/null &
		sp=$!
		sleep 0.5
		fio --name="$c" --ioengine=nbd --uri="$u" --rw="$rw" --bs=4k --iodepth="$qd" \
			--size="$SIZE" --time_based --runtime="$RUNTIME" --randseed=7 \
			--output-format=json --output="$OUT/$s.$c.json"
		kill -INT "$sp"
		wait "$sp" || true
		python3 - "$OUT/$s.$c.json" "$OUT/$s.$c.strace" "$s" "$c" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
n = j["read"]["total_ios"] + j["write"]["total_ios"]
rows = []
for line in open(sys.argv[2]).read().splitlines()[2:]:
    f = line.split()
    if len(f) < 5 or not f[3].isdigit() or f[-1] == "total":
        continue
    if int(f[3]) / n >= 0.01:
        rows.append((int(f[3]) / n, f[-1]))
rows.sort(reverse=True)
print(f"{sys.argv[3]:7} {sys.argv[4]:6} {n:8d} requests, {sum(r[0] for r in rows):5.2f} calls/request: " +
      ", ".join(f"{name} {v:.2f}" for v, name in rows))
PY
	done
done
