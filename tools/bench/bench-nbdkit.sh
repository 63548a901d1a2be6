#!/bin/bash
# SPDX-License-Identifier: MIT
# tierd's data path against `nbdkit file`, side by side in one run: every
# request a cache hit, both pools and nbdkit's file on tmpfs, no device model
# (base_profile = cache_profile = none), fio 4 KiB over NBD on a unix socket.
# Cases: randread and randwrite at QD 1 and QD 16 (one connection), and
# 4 connections x QD 32 (fio numjobs=4, one NBD connection per job; nbdkit
# with its default thread count).  Runs are interleaved (tierd, nbdkit,
# tierd, nbdkit, ...) BENCH_SAMPLES times so machine noise hits both alike;
# the table gives the median IOPS of each, the ratio tierd / nbdkit, and the
# median p50 latency, then each server's CPU time per request (user + system
# of all its threads from the end of fio's 1 s ramp to the end of the run,
# over the requests fio counted: the figure a loaded machine moves least).
# Numbers go in docs/BENCHMARKS.md ("The data path against nbdkit").
#
# Environment (defaults in brackets): BUILD_DIR [./build-bench, configured as
# a release build if missing], BENCH_SIZE [256M], BENCH_RUNTIME [10] seconds
# per run, BENCH_SAMPLES [3], BENCH_CASES [rr1,rw1,rr16,rw16,rr4x32,rw4x32],
# BENCH_DIR [/dev/shm], BENCH_OUT [a new /tmp dir], BENCH_TIERD_EXTRA [lines
# added to [global]], BENCH_PRELOADS ["" = glibc only; a comma list of
# name=path.so, e.g. "glibc=,jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2":
# each one is a tierd variant started with LD_PRELOAD=path; name=path.so@BIN
# runs the tierd binary BIN instead, e.g. "after=,before=@/tmp/old/tierd";
# a trailing #T starts that variant with TIERD_THREADS=T (threads = T), e.g.
# "t1=#1,t2=#2"],
# BENCH_NBDKIT [1: also run nbdkit], BENCH_CLEAN [1: before each randwrite
# case, `tierctl flush --wait`, so that its writes land on clean cached
# extents (the dearer case); 0: on what the earlier cases left dirty],
# BENCH_NICE [empty; e.g. -10 runs the
# servers and fio at that nice level (root), so that other load on a shared
# machine disturbs the comparison less: a single-threaded server loses more
# to competing threads than one with 16; with the kernel's autogroups
# (sched_autogroup_enabled) a nice level only ranks processes of one
# session, so the script then runs in a session of its own whose autogroup
# gets that nice level too].  The first variant is the reference of
# the ratio columns.
set -euo pipefail
# a nice level counts against other sessions only through the autogroup's
if [ -n "${BENCH_NICE:-}" ] && [ -z "${BENCH_OWN_SESSION:-}" ] &&
	[ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" = 1 ]; then
	BENCH_OWN_SESSION=1 exec setsid --wait bash "$0" "$@"
fi
if [ -n "${BENCH_OWN_SESSION:-}" ]; then
	echo "$BENCH_NICE" 2>/dev/null > /proc/self/autogroup ||
		echo "bench-nbdkit: could not set the session's autogroup to nice $BENCH_NICE" >&2
fi

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tools/bench/bench-lib.sh"
BUILD=${BUILD_DIR:-$ROOT/build-bench}
SIZE=${BENCH_SIZE:-256M}
RUNTIME=${BENCH_RUNTIME:-10}
SAMPLES=${BENCH_SAMPLES:-3}
CASES=${BENCH_CASES:-rr1,rw1,rr16,rw16,rr4x32,rw4x32}
DIR=${BENCH_DIR:-/dev/shm}
OUT=${BENCH_OUT:-$(mktemp -d /tmp/tierd-nbdkit.XXXXXX)}
PRELOADS=${BENCH_PRELOADS:-tierd=}
WITH_NBDKIT=${BENCH_NBDKIT:-1}
NICE=()
[ -z "${BENCH_NICE:-}" ] || NICE=(nice -n "$BENCH_NICE")
mkdir -p "$OUT"

for p in fio nbdkit nbdinfo python3; do
	command -v "$p" >/dev/null || { echo "bench-nbdkit: $p not installed (deploy/install-deps.sh)" >&2; exit 2; }
done
if [ ! -f "$BUILD/build.ninja" ]; then
	meson setup "$BUILD" "$ROOT" --buildtype=release >/dev/null
fi
ninja -C "$BUILD" daemon/tierd tools/tierctl >/dev/null
TIERD=$BUILD/daemon/tierd
CLEAN=${BENCH_CLEAN:-1}

WORK=$(mktemp -d "$DIR/tierd-nbdkit.XXXXXX")
TPID=
NPID=
cleanup() {
	for p in $TPID $NPID; do
		kill -KILL "$p" 2>/dev/null || true
	done
	rm -rf "$WORK"
}
trap cleanup EXIT

wait_sock() {   # wait_sock URI PID LOG
	for _ in $(seq 1 300); do
		nbdinfo --size "$1" >/dev/null 2>&1 && return 0
		kill -0 "$2" 2>/dev/null || { cat "$3" >&2; exit 1; }
		sleep 0.1
	done
	echo "bench-nbdkit: $1 did not come up" >&2
	exit 1
}

# start_tierd NAME PRELOAD: a fresh data directory, the whole image written
# once (extent promotion caches every block), so every later request hits.
start_tierd() {
	local name=$1 pre=$2
	rm -rf "$WORK/t"
	mkdir -p "$WORK/t"
	bench_all_hit_conf "$WORK/t" "$SIZE" "${BENCH_TIERD_EXTRA:-}"
	cp "$WORK/t/tierd.conf" "$OUT/tierd.conf"
	local bin=$TIERD threads=${TIERD_THREADS:-}
	if [[ $pre == *#* ]]; then
		threads=${pre##*#}
		pre=${pre%#*}
	fi
	if [[ $pre == *@* ]]; then
		bin=${pre#*@}
		pre=${pre%%@*}
	fi
	TIERD_THREADS=$threads LD_PRELOAD=$pre "${NICE[@]}" "$bin" --config "$WORK/t/tierd.conf" 2>> "$OUT/$name.tierd.log" &
	TPID=$!
	wait_sock "nbd+unix:///vol0?socket=$WORK/t/nbd.sock" "$TPID" "$OUT/$name.tierd.log"
	fio --name=fill --ioengine=nbd --uri="nbd+unix:///vol0?socket=$WORK/t/nbd.sock" \
		--rw=write --bs=1M --iodepth=4 --size="$SIZE" --output=/dev/null
}

stop_tierd() {
	kill -TERM "$TPID"
	wait "$TPID" || echo "tierd exited with status $?" >&2
	TPID=
}

start_nbdkit() {
	rm -f "$WORK/img" "$WORK/nbdkit.sock"
	truncate -s "$SIZE" "$WORK/img"
	"${NICE[@]}" nbdkit --exit-with-parent -f -U "$WORK/nbdkit.sock" file "$WORK/img" 2>> "$OUT/nbdkit.log" &
	NPID=$!
	wait_sock "nbd+unix://?socket=$WORK/nbdkit.sock" "$NPID" "$OUT/nbdkit.log"
	fio --name=fill --ioengine=nbd --uri="nbd+unix://?socket=$WORK/nbdkit.sock" \
		--rw=write --bs=1M --iodepth=4 --size="$SIZE" --output=/dev/null
}

stop_nbdkit() {
	kill -TERM "$NPID"
	wait "$NPID" || true
	NPID=
}

# cpu_ticks PID: the server's user + system time so far, all threads (clock ticks)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# run_case CASE URI OUTFILE SERVER_PID: also writes OUTFILE.cpu, the server's
# CPU ticks over the measured part of the run (from the end of fio's ramp)
run_case() {
	local c=$1 uri=$2 out=$3 spid=$4 rw jobs qd t0 t1
	case "$c" in
	rr*) rw=randread ;;
	rw*) rw=randwrite ;;
	*) echo "unknown case $c" >&2; exit 2 ;;
	esac
	qd=${c#r[rw]}
	jobs=1
	if [[ $qd == *x* ]]; then
		jobs=${qd%x*}
		qd=${qd#*x}
	fi
	"${NICE[@]}" fio --name="$c" --ioengine=nbd --uri="$uri" --rw="$rw" --bs=4k --iodepth="$qd" \
		--numjobs="$jobs" --group_reporting --size="$SIZE" --time_based \
		--runtime="$RUNTIME" --ramp_time=1 --randseed=7 \
		--output-format=json --output="$out" &
	local fpid=$!
	sleep 1
	t0=$(cpu_ticks "$spid")
	wait "$fpid"
	t1=$(cpu_ticks "$spid")
	echo "$((t1 - t0)) $(getconf CLK_TCK)" > "$out.cpu"
}

echo "machine: $(nproc) CPUs, $(uname -sr), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "tree: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo +dirty), $(nbdkit --version), $(fio --version)"
echo "image $SIZE on $DIR, ${RUNTIME}s per run, $SAMPLES samples, cases $CASES, load $(cut -d' ' -f1-3 /proc/loadavg), $(cat /proc/self/autogroup 2>/dev/null || echo "no autogroup")"
IFS=, read -ra cases <<< "$CASES"
IFS=, read -ra pres <<< "$PRELOADS"
for s in $(seq 1 "$SAMPLES"); do
	for v in "${pres[@]}"; do
		name=${v%%=*}
		start_tierd "$name" "${v#*=}"
		for c in "${cases[@]}"; do
			if [ "$CLEAN" = 1 ] && [[ $c == rw* ]]; then
				"$BUILD/tools/tierctl" --socket "$WORK/t/tierd.asok" flush --wait >/dev/null
			fi
			run_case "$c" "nbd+unix:///vol0?socket=$WORK/t/nbd.sock" "$OUT/$name.$c.$s.json" "$TPID"
		done
		stop_tierd
	done
	if [ "$WITH_NBDKIT" = 1 ]; then
		start_nbdkit
		for c in "${cases[@]}"; do
			run_case "$c" "nbd+unix://?socket=$WORK/nbdkit.sock" "$OUT/nbdkit.$c.$s.json" "$NPID"
		done
		stop_nbdkit
	fi
	echo "sample $s done"
done

printf '\n== summary (%s)\n' "$OUT"
names=()
for v in "${pres[@]}"; do names+=("${v%%=*}"); done
[ "$WITH_NBDKIT" = 1 ] && names+=(nbdkit)
python3 - "$OUT" "$CASES" "$SAMPLES" "${names[@]}" <<'PY'
import json, statistics, sys
out, cases, samples, names = sys.argv[1], sys.argv[2].split(','), int(sys.argv[3]), sys.argv[4:]
def load(n, c, s):
    j = json.load(open(f"{out}/{n}.{c}.{s}.json"))["jobs"][0]
    d = j["read"] if c.startswith("rr") else j["write"]
    return d["iops"], d["clat_ns"]["percentile"]["50.000000"] / 1000.0
def cpu_us(n, c, s):   # server CPU per request over the measured part
    j = json.load(open(f"{out}/{n}.{c}.{s}.json"))["jobs"][0]
    d = j["read"] if c.startswith("rr") else j["write"]
    ticks, hz = map(int, open(f"{out}/{n}.{c}.{s}.json.cpu").read().split())
    return ticks / hz * 1e6 / max(d["total_ios"], 1)
ref = names[0]
hdr = f"{'case':8}"
for n in names:
    hdr += f" {n + ' IOPS':>16} {'p50 us':>7}"
for n in names[1:]:
    hdr += f" {ref + '/' + n:>16}"
print(hdr)
for c in cases:
    row, med = f"{c:8}", {}
    for n in names:
        v = [load(n, c, s) for s in range(1, samples + 1)]
        med[n] = statistics.median(x[0] for x in v)
        row += f" {med[n]:16.0f} {statistics.median(x[1] for x in v):7.1f}"
    for n in names[1:]:
        row += f" {med[ref] / med[n]:16.2f}"
    print(row)
print("server CPU us per request (user + system, all threads; median):")
print(f"{'case':8}" + "".join(f" {n:>12}" for n in names) + "".join(f" {ref + '/' + n:>16}" for n in names[1:]))
for c in cases:
    med = {n: statistics.median(cpu_us(n, c, s) for s in range(1, samples + 1)) for n in names}
    print(f"{c:8}" + "".join(f" {med[n]:12.1f}" for n in names) +
          "".join(f" {med[ref] / med[n]:16.2f}" for n in names[1:]))
print("samples (IOPS):")
for c in cases:
    for n in names:
        print(f"  {c:8} {n:10}", " ".join(f"{load(n, c, s)[0]:.0f}" for s in range(1, samples + 1)))
PY
