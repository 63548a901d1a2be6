#!/bin/bash
# SPDX-License-Identifier: MIT
# Where a request's CPU goes in tierd: perf samples tierd (all threads, call
# graphs through frame pointers) while fio runs one case of
# deploy/bench-nbdkit.sh (all hits, pools on tmpfs, no device model), and the
# inclusive share of each stage of the data path is turned into CPU
# microseconds per request (share x tierd's CPU time / requests served).
# Stages are named by the functions that bound them (kernel syscalls for the
# socket, the futex hand-off and the event loop; tierd's own functions for
# the rest); they nest (the engine runs inside the parse, the reply write
# inside the completion drain), so the rows do not add up to the total.
#
# Usage: deploy/perf-breakdown.sh [CASE...]   (CASE as in bench-nbdkit.sh:
# rr1 rw1 rr16 rw16 ...; default rr1 rw1).  Environment: BUILD_DIR
# [./build-prof: a release build with -g -fno-omit-frame-pointer, set up if
# missing], BENCH_SIZE [256M], BENCH_RUNTIME [8], BENCH_FREQ [4000] Hz,
# BENCH_TIERD_EXTRA [lines for [global]], BENCH_OUT [a new /tmp dir: perf.data
# per case, for perf report].
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/deploy/bench-lib.sh"
BUILD=${BUILD_DIR:-$ROOT/build-prof}
SIZE=${BENCH_SIZE:-256M}
RUNTIME=${BENCH_RUNTIME:-8}
FREQ=${BENCH_FREQ:-4000}
[ $# -gt 0 ] || set -- rr1 rw1
command -v perf >/dev/null || { echo "perf-breakdown: perf not installed" >&2; exit 2; }
if [ ! -f "$BUILD/build.ninja" ]; then
	meson setup "$BUILD" "$ROOT" --buildtype=release -Ddebug=true \
		-Dc_args=-fno-omit-frame-pointer -Dtests=disabled >/dev/null
fi
ninja -C "$BUILD" daemon/tierd >/dev/null
W=$(mktemp -d /dev/shm/tierd-perf.XXXXXX)
OUT=${BENCH_OUT:-$(mktemp -d /tmp/tierd-perf.XXXXXX)}
mkdir -p "$OUT"
PID=
cleanup() { [ -z "$PID" ] || kill -KILL "$PID" 2>/dev/null || true; rm -rf "$W"; wait 2>/dev/null || true; }
trap cleanup EXIT
bench_all_hit_conf "$W" "$SIZE" "${BENCH_TIERD_EXTRA:-}"
"$BUILD/daemon/tierd" --config "$W/tierd.conf" 2> "$OUT/tierd.log" &
PID=$!
U="nbd+unix:///vol0?socket=$W/nbd.sock"
for _ in $(seq 1 100); do nbdinfo --size "$U" >/dev/null 2>&1 && break; sleep 0.1; done
fio --name=fill --ioengine=nbd --uri="$U" --rw=write --bs=1M --iodepth=4 --size="$SIZE" --output=/dev/null

echo "machine: $(nproc) CPUs, $(uname -sr); tree $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo +dirty)"
for c in "$@"; do
	rw=randread; [[ $c == rw* ]] && rw=randwrite
	qd=${c#r[rw]}
	fio --name="$c" --ioengine=nbd --uri="$U" --rw="$rw" --bs=4k --iodepth="$qd" \
		--size="$SIZE" --time_based --runtime=$((RUNTIME + 2)) --randseed=7 \
		--output-format=json --output="$W/$c.json" &
	FIO=$!
	sleep 1
	perf record -q -F "$FREQ" -g -p "$PID" -o "$OUT/$c.data" -- sleep "$RUNTIME" 2>/dev/null
	wait "$FIO"
	python3 - "$W/$c.json" "$OUT/$c.data" "$c" "$RUNTIME" "$FREQ" <<'PY'
import json, subprocess, sys, re
js, data, case, runtime, freq = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
j = json.load(open(js))["jobs"][0]
d = j["read"] if case.startswith("rr") else j["write"]
iops = d["iops"]
reqs = iops * runtime
rep = subprocess.run(["perf", "report", "-i", data, "--children", "--stdio", "-g", "none",
                      "--sort", "sym", "--percent-limit", "0"],
                     capture_output=True, text=True).stdout
total = 0
m = re.search(r"Samples: (\d+)(K?)", rep)
if m:
    total = int(m.group(1)) * (1000 if m.group(2) else 1)
cnt = subprocess.run(["perf", "report", "-i", data, "--stdio", "--show-nr-samples",
                      "--sort", "comm", "-g", "none"], capture_output=True, text=True).stdout
for line in cnt.splitlines():
    f = line.split()
    if len(f) >= 3 and f[-1] == "tierd" and f[-2].isdigit():
        total = int(f[-2])
share = {}
for line in rep.splitlines():
    f = line.split()
    if len(f) >= 4 and f[0].endswith("%") and f[1].endswith("%"):
        share[f[-1]] = float(f[0][:-1])
cpu_us = total / freq * 1e6 / reqs if reqs else 0
stages = [
    ("socket read (sock_read_iter)", ["sock_read_iter"]),
    ("parse + engine + submit (nbd__read_cb)", ["nbd__read_cb"]),
    ("  engine (tier_image_submit)", ["tier_image_submit"]),
    ("  store submit (local_submit)", ["local_submit"]),
    ("worker hand-off (futex syscalls)", ["__x64_sys_futex"]),
    ("object open + close (openat, close)", ["__x64_sys_openat", "__x64_sys_close"]),
    ("file I/O (pread, pwrite, xattrs)", ["__x64_sys_pread64", "__x64_sys_pwrite64",
                                          "__x64_sys_fsetxattr", "__x64_sys_fgetxattr"]),
    ("device-model delay thread (delayer_main)", ["delayer_main"]),
    ("completion queue (tier__cq_push, tier_cq_drain)", ["tier__cq_push", "tier_cq_drain"]),
    ("loop wake-up (eventfd_write, sched_yield)", ["eventfd_write", "__x64_sys_sched_yield"]),
    ("loop wait (epoll_wait)", ["__x64_sys_epoll_wait"]),
    ("reply write (sock_write_iter)", ["sock_write_iter"]),
    ("engine tick (tier_engine_tick)", ["tier_engine_tick"]),
    ("context switches (schedule, all threads)", ["schedule"]),
]
print(f"\n== {case}: {iops:.0f} IOPS, tierd CPU {cpu_us:.1f} us/request "
      f"({total} samples at {freq:.0f} Hz over {runtime:.0f} s)")
for name, syms in stages:
    p = sum(share.get(s, 0.0) for s in syms)
    print(f"  {name:52} {p:5.1f}%  {p / 100 * cpu_us:6.1f} us")
PY
done
