#!/bin/bash
# SPDX-License-Identifier: MIT
# Where a QD 1 request's wall time goes, tierd against `nbdkit file`: both
# servers up side by side (all hits, tmpfs, no device model, as
# deploy/bench-nbdkit.sh), one fio run per server and case (4 KiB, QD 1,
# 5 s), and `perf sched record -a` for 2 s in the middle of each.  For each
# run it prints fio's IOPS, p50 and mean completion latency, then from
# `perf sched timehist`, per switch-out of the server's threads and of fio's:
# how long the thread had slept (wait), waited for a CPU once woken (sch
# delay) and ran (run).  Root (perf, the autogroup).
#
# Usage: deploy/qd1-sched.sh   Environment: BUILD_DIR [./build-rel], TIERD
# [the build's daemon/tierd], CASES ["rr1 rw1"], OUT [a new /tmp dir],
# BENCH_NICE [-10: this session's autogroup and the processes' nice level],
# BUSY_POLL_US [tierd's default; 0 shows the loop without its busy-poll].
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/deploy/bench-lib.sh"
BUILD=${BUILD_DIR:-$ROOT/build-rel}
TIERD=${TIERD:-$BUILD/daemon/tierd}
NICE=${BENCH_NICE:--10}
if [ -z "${QD1_OWN_SESSION:-}" ]; then
	QD1_OWN_SESSION=1 exec setsid --wait bash "$0" "$@"
fi
echo "$NICE" 2>/dev/null > /proc/self/autogroup || echo "qd1-sched: autogroup not set" >&2
for p in fio nbdkit nbdinfo perf python3; do
	command -v "$p" >/dev/null || { echo "qd1-sched: $p not installed" >&2; exit 2; }
done
W=$(mktemp -d /dev/shm/tierd-qd1.XXXXXX)
OUT=${OUT:-$(mktemp -d /tmp/tierd-qd1.XXXXXX)}
mkdir -p "$OUT"
TP=
NP=
cleanup() { for p in $TP $NP; do kill -KILL "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$W"; }
trap cleanup EXIT
bench_all_hit_conf "$W" 256M "threads = 1
${BUSY_POLL_US:+busy_poll_us = $BUSY_POLL_US}"
nice -n "$NICE" "$TIERD" --config "$W/tierd.conf" 2> "$OUT/tierd.log" &
TP=$!
truncate -s 256M "$W/img"
nice -n "$NICE" nbdkit --exit-with-parent -f -U "$W/nbdkit.sock" file "$W/img" 2> "$OUT/nbdkit.log" &
NP=$!
TU="nbd+unix:///vol0?socket=$W/nbd.sock"
NU="nbd+unix://?socket=$W/nbdkit.sock"
for u in "$TU" "$NU"; do
	for _ in $(seq 1 100); do nbdinfo --size "$u" >/dev/null 2>&1 && break; sleep 0.1; done
	fio --name=fill --ioengine=nbd --uri="$u" --rw=write --bs=1M --iodepth=4 --size=256M \
		--output=/dev/null
done
echo "tree: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown), load $(cut -d' ' -f1-3 /proc/loadavg), $(cat /proc/self/autogroup 2>/dev/null || echo "no autogroup")"
# an idle vCPU that halts at once (guest_halt_poll_ns 0) makes every wake-up
# of a sleeping loop cost a trip through the host (docs/BENCHMARKS.md, 15)
echo "cpuidle: $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none)/$(cat /sys/devices/system/cpu/cpuidle/current_governor_ro 2>/dev/null || echo none), guest_halt_poll_ns $(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns 2>/dev/null || echo n/a)"
# summary FILE.th PATTERN: mean wait, sch delay and run per switch-out of the threads matching PATTERN
summary() {
	grep -E "$2" "$1" | awk '{ w += $4; d += $5; r += $6; n++ }
		END { if (n) printf "%6d switches, wait %7.1f us, sch delay %5.1f us, run %5.1f us", n, w / n * 1000, d / n * 1000, r / n * 1000 }'
}
for c in ${CASES:-rr1 rw1}; do
	rw=randread
	[[ $c == rw* ]] && rw=randwrite
	for s in tierd nbdkit; do
		u=$TU pat="tierd\\[$TP\\]"
		[ "$s" = nbdkit ] && u=$NU pat='nbdkit\['
		nice -n "$NICE" fio --name="$c" --ioengine=nbd --uri="$u" --rw=$rw --bs=4k --iodepth=1 \
			--size=256M --time_based --runtime=5 --ramp_time=1 --randseed=7 \
			--output-format=json --output="$OUT/$s.$c.json" &
		fp=$!
		sleep 1.5
		perf sched record -a -o "$OUT/$s.$c.data" -- sleep 2 >/dev/null 2>&1
		wait "$fp"
		perf sched timehist -i "$OUT/$s.$c.data" > "$OUT/$s.$c.th" 2>/dev/null
		python3 - "$OUT/$s.$c.json" "$s" "$c" "$rw" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))['jobs'][0]['read' if sys.argv[4] == 'randread' else 'write']
print(f"{sys.argv[2]:7} {sys.argv[3]:4} {j['iops']:8.0f} IOPS, p50 {j['clat_ns']['percentile']['50.000000'] / 1000:6.1f} us, mean {j['clat_ns']['mean'] / 1000:6.1f} us")
PY
		echo "        server: $(summary "$OUT/$s.$c.th" "$pat")"
		echo "        fio:    $(summary "$OUT/$s.$c.th" ' fio\[')"
	done
done
