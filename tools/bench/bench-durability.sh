#!/bin/bash
# SPDX-License-Identifier: MIT
# Durability benchmarks (docs/BENCHMARKS.md, "The cost of durability"): the
# tierd of this tree ("new") side by side with the tierd of an older commit
# ("old", default 57a23bd, the engine before the durability work), each
# started fresh by this script on the embedded local backend (data_dir on the
# real disk under $BENCH_DATA, not tmpfs), base pool `hdd` device model, cache
# pool `ssd` (docs/DEVICE-MODEL.md).  Parts:
#
#   storm  k = 1, 8, 64 NBD FLUSHes in flight over 1000 dirty objects
#          (4 KiB into each of 1000 distinct 4 MiB objects of a 4 GiB image,
#          extent mode, cache target 1G so they stay dirty), tools/bench/flush-storm.py
#   fsync  fio --ioengine=nbd --rw=randwrite --bs=4k --fsync=1 --iodepth=8
#          --numjobs=4, time based: IOPS and tierd's peak RSS (VmHWM)
#   mix    the quickstart fio job (4 KiB randrw 70% writes, zipf:1.1, 8 GiB
#          image) at QD 1 then QD 16 on a fresh tierd, extent mode (the
#          quickstart's [tier]) and object mode (promote_granularity = object,
#          write and read recency 1), new and old alternating, N samples
#   strace the mix job at QD 16 once per build and mode under
#          `strace -f -c -e trace=fsync,fdatasync`, with tierd's op counters
#
# Every tierd runs under `ulimit -v $BENCH_VMEM_KB` (the old engine's FLUSH
# fan-out is exponential) and every client under a timeout; "NO ANSWER",
# a timeout or tierd's death is reported as such.  The old tree is a
# `git worktree` (never a checkout of this tree), removed at the end unless
# OLD_BUILD was given.
#
# Environment (defaults in brackets): NEW_BUILD [/tmp/bench-new, release
# build of this tree, set up if missing], OLD_COMMIT [57a23bd], OLD_BUILD
# [a release build in a temporary worktree of OLD_COMMIT], BENCH_PARTS
# [storm,fsync,mix,strace], BENCH_BUILDS [new,old], BENCH_DATA [/tmp],
# BENCH_VMEM_KB [4194304 = 4 GiB], STORM_ROUNDS [3], STORM_TIMEOUT [30] s,
# FSYNC_RUNTIME [30] s, MIX_RUNTIME [15] s per QD, MIX_SAMPLES [3],
# BENCH_OUT [a new /tmp dir: logs, raw outputs, summary.txt].
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NEW_BUILD=${NEW_BUILD:-/tmp/bench-new}
OLD_COMMIT=${OLD_COMMIT:-57a23bd}
PARTS=${BENCH_PARTS:-storm,fsync,mix,strace}
BUILDS=${BENCH_BUILDS:-new,old}
DATA=${BENCH_DATA:-/tmp}
VMEM=${BENCH_VMEM_KB:-4194304}
STORM_ROUNDS=${STORM_ROUNDS:-3}
STORM_TIMEOUT=${STORM_TIMEOUT:-30}
FSYNC_RUNTIME=${FSYNC_RUNTIME:-30}
MIX_RUNTIME=${MIX_RUNTIME:-15}
MIX_SAMPLES=${MIX_SAMPLES:-3}
OUT=${BENCH_OUT:-$(mktemp -d /tmp/tierd-durability.XXXXXX)}
PY=/usr/bin/python3          # python3-libnbd is a Debian package
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
log() { printf '%s\n' "$*" | tee -a "$SUMMARY"; }
has() { case ",$2," in *",$1,"*) return 0 ;; esac; return 1; }

if [ "$(stat -f -c %T "$DATA")" = tmpfs ]; then
	echo "BENCH_DATA=$DATA is tmpfs: syncs would cost nothing; use a real disk" >&2
	exit 2
fi
"$PY" -c 'import nbd' 2>/dev/null || { echo "needs python3-libnbd" >&2; exit 2; }

# ---- builds ----
OLD_WT=
# built only when missing: others may be editing this tree while it runs
if [ ! -x "$NEW_BUILD/daemon/tierd" ] || [ ! -x "$NEW_BUILD/tools/tierctl" ]; then
	[ -f "$NEW_BUILD/build.ninja" ] || meson setup "$NEW_BUILD" "$ROOT" --buildtype=release >/dev/null
	ninja -C "$NEW_BUILD" daemon/tierd tools/tierctl >/dev/null
	git -C "$ROOT" rev-parse --short HEAD > "$NEW_BUILD/.bench-commit"
fi
if has old "$BUILDS" && [ -z "${OLD_BUILD:-}" ]; then
	OLD_WT=$(mktemp -d /tmp/tierd-old-wt.XXXXXX)
	rmdir "$OLD_WT"
	git -C "$ROOT" worktree add --detach "$OLD_WT" "$OLD_COMMIT" >/dev/null 2>&1
	OLD_BUILD=$OLD_WT/build-rel
	meson setup "$OLD_BUILD" "$OLD_WT" --buildtype=release >/dev/null
	ninja -C "$OLD_BUILD" daemon/tierd tools/tierctl >/dev/null
fi
tierd_of() { if [ "$1" = new ]; then echo "$NEW_BUILD/daemon/tierd"; else echo "$OLD_BUILD/daemon/tierd"; fi; }
TIERCTL=$NEW_BUILD/tools/tierctl

STATE=
PID=
cleanup() {
	if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
		kill -KILL "$PID" 2>/dev/null || true
		wait "$PID" 2>/dev/null || true
	fi
	[ -z "$STATE" ] || rm -rf "$STATE"
	if [ -n "$OLD_WT" ]; then
		git -C "$ROOT" worktree remove --force "$OLD_WT" >/dev/null 2>&1 || true
	fi
}
trap cleanup EXIT

# tier_conf MODE SIZE: the [tier] and [image] sections
tier_conf() {
	local gran=extent wrec=0
	[ "$1" = object ] && { gran=object; wrec=1; }
	cat <<CFG
[tier]
cache_mode = writeback
target_max_bytes = 1G
hit_set_period = 10s
hit_set_count = 4
min_write_recency_for_promote = $wrec
min_read_recency_for_promote = 1
promote_granularity = $gran

[image.vol0]
size = $2
CFG
}

# start_tierd BUILD MODE SIZE TAG [WRAPPER...]: fresh state dir, tierd under
# ulimit -v; sets STATE, PID (the wrapper's pid when there is one), URI, ASOK
start_tierd() {
	local build=$1 mode=$2 size=$3 tag=$4
	shift 4
	STATE=$(mktemp -d "$DATA/tierd-durability-state.XXXXXX")
	URI="nbd+unix:///vol0?socket=$STATE/nbd.sock"
	ASOK=$STATE/tierd.asok
	{
		printf '%s\n' "# written by tools/bench/bench-durability.sh ($build, $mode)" \
			"[global]" "backend = local" "listen = unix:$STATE/nbd.sock" \
			"admin_socket = $ASOK" "log_level = warn" "" "[local]" \
			"data_dir = $STATE/data" "base_profile = hdd" "cache_profile = ssd" ""
		tier_conf "$mode" "$size"
	} > "$STATE/tierd.conf"
	cp "$STATE/tierd.conf" "$OUT/$tag.conf"
	( ulimit -v "$VMEM"; exec "$@" "$(tierd_of "$build")" --config "$STATE/tierd.conf" ) \
		2> "$OUT/$tag.tierd.log" &
	PID=$!
	for _ in $(seq 1 300); do
		[ -S "$STATE/nbd.sock" ] && [ -S "$ASOK" ] && return 0
		kill -0 "$PID" 2>/dev/null || { cat "$OUT/$tag.tierd.log" >&2; exit 1; }
		sleep 0.1
	done
	echo "tierd ($tag) did not start" >&2
	exit 1
}

# the tierd process itself (PID may be strace)
tierd_pid() {
	local p=$PID c
	c=$(pgrep -P "$p" -x tierd 2>/dev/null | head -n1 || true)
	[ -n "$c" ] && p=$c
	echo "$p"
}

hwm() { awk '/^VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$(tierd_pid)/status" 2>/dev/null || echo "?"; }

# stop_tierd: SIGTERM, 20 s, then SIGKILL; sets HOW (how it ended)
stop_tierd() {
	local rc=0 how=exited
	if ! kill -0 "$PID" 2>/dev/null; then
		how=died
	else
		kill -TERM "$(tierd_pid)" 2>/dev/null || true
		for _ in $(seq 1 200); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
		if kill -0 "$PID" 2>/dev/null; then
			how="killed (no exit 20 s after SIGTERM)"
			kill -KILL "$(tierd_pid)" 2>/dev/null || true
			kill -KILL "$PID" 2>/dev/null || true
		fi
	fi
	wait "$PID" 2>/dev/null || rc=$?
	PID=
	rm -rf "$STATE"
	STATE=
	HOW="$how, status $rc"
}

load() { cut -d' ' -f1-3 /proc/loadavg; }

log "machine: $(nproc) CPUs, $(uname -sr), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/^Mem/ {print $2}') GiB RAM"
log "data dir: $DATA ($(stat -f -c %T "$DATA"), $(df --output=source "$DATA" | tail -n1)); tierd under ulimit -v $VMEM KiB"
dirty_src=$(git -C "$ROOT" status --porcelain -- libtier daemon include | wc -l)
log "new: HEAD $(git -C "$ROOT" rev-parse --short HEAD), code (libtier daemon include) last changed in $(git -C "$ROOT" log -1 --format=%h -- libtier daemon include) ($dirty_src uncommitted files in libtier/ daemon/ include/), binary in $NEW_BUILD built from $(cat "$NEW_BUILD/.bench-commit" 2>/dev/null || echo "? (not built by this script)"); old: ${OLD_BUILD:+$(git -C "$OLD_BUILD/.." rev-parse --short HEAD 2>/dev/null || echo "$OLD_COMMIT") in $OLD_BUILD}"
log "output: $OUT"
IFS=, read -ra builds <<< "$BUILDS"

# ---- part 1: FLUSH storms ----
if has storm "$PARTS"; then
	log ""
	log "== storm: k FLUSHes in flight over 1000 dirty objects (4 KiB each, 4 MiB objects, extent mode), $STORM_ROUNDS rounds per k, timeout $STORM_TIMEOUT s"
	for b in "${builds[@]}"; do
		for k in 1 8 64; do
			tag=storm-$b-k$k
			start_tierd "$b" extent 4G "$tag"
			rc=0
			log "-- $b k=$k (load $(load))"
			timeout -k 10 $((STORM_TIMEOUT * (STORM_ROUNDS + 2) + 60)) \
				"$PY" "$ROOT/tools/bench/flush-storm.py" "$URI" --objects 1000 \
				--object-size 4M --bs 4K --ks "$k" --rounds "$STORM_ROUNDS" \
				--timeout "$STORM_TIMEOUT" --label "$b " > "$OUT/$tag.txt" 2>&1 || rc=$?
			sed 's/^/   /' "$OUT/$tag.txt" | tee -a "$SUMMARY"
			peak=$(hwm)
			stop_tierd
			log "   client status $rc; tierd peak RSS (VmHWM) $peak MiB; tierd $HOW"
			grep -v '^$' "$OUT/$tag.tierd.log" | tail -n 3 | sed 's/^/   log: /' | tee -a "$SUMMARY" || true
		done
	done
fi

# ---- part 2: fio --fsync=1 ----
if has fsync "$PARTS"; then
	log ""
	log "== fsync: fio randwrite 4k --fsync=1 --iodepth=8 --numjobs=4, ${FSYNC_RUNTIME}s, extent mode (quickstart [tier]), 8 GiB image"
	for b in "${builds[@]}"; do
		tag=fsync-$b
		start_tierd "$b" extent 8G "$tag"
		rc=0
		log "-- $b (load $(load))"
		timeout -k 10 $((FSYNC_RUNTIME + 60)) fio --name=fsync --ioengine=nbd --uri="$URI" \
			--rw=randwrite --bs=4k --fsync=1 --iodepth=8 --numjobs=4 \
			--size=8G --norandommap --time_based --runtime="$FSYNC_RUNTIME" \
			--group_reporting --output-format=terse --terse-version=3 \
			> "$OUT/$tag.fio" 2> "$OUT/$tag.fio.err" || rc=$?
		peak=$(hwm)
		res=$(awk -F';' 'NF > 100 { printf "write %.0f IOPS, %.0f writes", $49, $47 / 4 }' "$OUT/$tag.fio")
		stop_tierd
		log "   fio status $rc${res:+; $res}; tierd peak RSS (VmHWM) $peak MiB; tierd $HOW"
		tail -n 2 "$OUT/$tag.fio.err" | sed 's/^/   fio: /' | tee -a "$SUMMARY" || true
		grep -v '^$' "$OUT/$tag.tierd.log" | tail -n 3 | sed 's/^/   log: /' | tee -a "$SUMMARY" || true
	done
fi

# run_mix TAG QD SECONDS: the quickstart's fio job; one terse line to TAG.qdQD.fio
run_mix() {
	timeout -k 10 $(($3 + 60)) fio --name="qd$2" --ioengine=nbd --uri="$URI" \
		--rw=randrw --rwmixwrite=70 --bs=4k --iodepth="$2" \
		--random_distribution=zipf:1.1 --size=8G --norandommap \
		--time_based --runtime="$3" --ramp_time=2 \
		--output-format=terse --terse-version=3 > "$OUT/$1.qd$2.fio" 2>> "$OUT/$1.fio.err" || true
	awk -F';' 'NF > 100 { split($71, p, "="); printf "%.0f %.0f %s", $8 + $49, $49, p[2] }' "$OUT/$1.qd$2.fio"
}

# ---- part 3: the quickstart workload, alternating ----
if has mix "$PARTS"; then
	log ""
	log "== mix: quickstart fio job (randrw 70% writes, zipf:1.1, 4k, 8G), ${MIX_RUNTIME}s at QD 1 then ${MIX_RUNTIME}s at QD 16 per fresh tierd, $MIX_SAMPLES samples, new/old alternating"
	MIXCSV=$OUT/mix.csv
	echo "sample,mode,build,qd,iops,write_iops,write_p99_us,load1" > "$MIXCSV"
	for s in $(seq 1 "$MIX_SAMPLES"); do
		for mode in extent object; do
			order=("${builds[@]}")
			if [ $((s % 2)) = 0 ]; then order=(); for ((i = ${#builds[@]} - 1; i >= 0; i--)); do order+=("${builds[i]}"); done; fi
			for b in "${order[@]}"; do
				tag=mix-$mode-$b-s$s
				start_tierd "$b" "$mode" 8G "$tag"
				l=$(load)
				for qd in 1 16; do
					read -r iops wiops p99 <<< "$(run_mix "$tag" "$qd" "$MIX_RUNTIME")" || true
					echo "$s,$mode,$b,$qd,${iops:-},${wiops:-},${p99:-},${l%% *}" >> "$MIXCSV"
					log "   sample $s $mode $b QD $qd: ${iops:-?} IOPS (write ${wiops:-?}, write p99 ${p99:-?} us), load $l"
				done
				"$TIERCTL" --socket "$ASOK" perf dump > "$OUT/$tag.perf.json" 2>/dev/null || true
				stop_tierd
				case $HOW in exited*) ;; *) log "   tierd $HOW" ;; esac
			done
		done
	done
	log ""
	log "-- mix medians (IOPS = read + write; ratio new/old)"
	"$PY" - "$MIXCSV" <<'EOF' | tee -a "$SUMMARY"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for mode in ("extent", "object"):
    for qd in ("1", "16"):
        med = {}
        for b in ("new", "old"):
            v = [float(r["iops"]) for r in rows if r["mode"] == mode and r["qd"] == qd
                 and r["build"] == b and r["iops"]]
            p = [float(r["write_p99_us"]) for r in rows if r["mode"] == mode and r["qd"] == qd
                 and r["build"] == b and r["write_p99_us"]]
            if v:
                med[b] = (statistics.median(v), statistics.median(p) if p else 0, v)
        line = "   %-6s QD %-2s" % (mode, qd)
        for b, (m, p, v) in med.items():
            line += "  %s %6.0f IOPS (%s; write p99 %.0f us)" % (b, m, "/".join("%.0f" % x for x in v), p)
        if "new" in med and "old" in med:
            line += "  new/old %.2f" % (med["new"][0] / med["old"][0])
        print(line)
EOF
fi

# ---- part 4: sync counts ----
if has strace "$PARTS"; then
	log ""
	log "== strace: the mix job at QD 16 for ${MIX_RUNTIME}s under strace -f -c -e trace=fsync,fdatasync (slower: counts, not speed)"
	for mode in extent object; do
		for b in "${builds[@]}"; do
			tag=strace-$mode-$b
			start_tierd "$b" "$mode" 8G "$tag" strace -f -c -e trace=fsync,fdatasync -o "$OUT/$tag.strace"
			read -r iops wiops p99 <<< "$(run_mix "$tag" 16 "$MIX_RUNTIME")" || true
			"$TIERCTL" --socket "$ASOK" perf dump > "$OUT/$tag.perf.json" 2>/dev/null || true
			stop_tierd
			for _ in $(seq 1 50); do [ -s "$OUT/$tag.strace" ] && break; sleep 0.1; done
			counts=$("$PY" - "$OUT/$tag.strace" "$OUT/$tag.perf.json" <<'EOF'
import json, sys
calls = {"fsync": 0, "fdatasync": 0}
for line in open(sys.argv[1]):
    f = line.split()
    if f and f[-1] in calls:
        # % time, seconds, usecs/call, calls, [errors], syscall
        calls[f[-1]] = int(f[3])
try:
    c = json.load(open(sys.argv[2]))["tierd"]
except Exception:
    c = {}
w = c.get("write_ops", 0)
s = "fsync %d, fdatasync %d" % (calls["fsync"], calls["fdatasync"])
if w:
    s += "; client writes %d, reads %d -> %.3f syncs per client write" % (
        w, c.get("read_ops", 0), (calls["fsync"] + calls["fdatasync"]) / w)
s += "; promotions %s, flushes %s, evictions %s" % (
    c.get("promotions", "?"), c.get("flushes", "?"), c.get("evictions", "?"))
print(s)
EOF
)
			log "   $mode $b: ${iops:-?} IOPS under strace; $counts; tierd $HOW"
		done
	done
fi
log ""
log "done; raw output in $OUT"
