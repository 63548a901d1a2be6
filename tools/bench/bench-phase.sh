#!/bin/bash
# SPDX-License-Identifier: MIT
# A load whose hot spot moves (tier-sim's shift pattern) at a deep queue,
# real tierd on the local backend with the `hdd` base and `ssd` cache
# device models, two tierd binaries interleaved (docs/BENCHMARKS.md,
# "The policy suite").
#
# Usage: tools/bench/bench-phase.sh OUTDIR TIERD_A TIERD_B [ROUNDS]
#   TIERD_A, TIERD_B  tierd binaries (tier-bench: the one beside TIERD_B,
#                     ../tools/tier-bench of its build, or $TIER_BENCH)
#   ROUNDS            A/B pairs (default 2)
# Per run: a fresh sparse 16 GiB image, target_max_bytes 7795507 (5% of the
# 4 KiB blocks the default workload touches, as tier-sim --cache 5%), then
# PHASE_OPS requests of PHASE_WL at PHASE_QD from an empty cache, with the
# admin socket's counter deltas.  Prints one line per run: IOPS, mean and
# p99 latency, hit ratio, flushes, evictions, base bytes per client byte.
# Env: PHASE_OPS (200000), PHASE_QD (64), PHASE_SIZE (16G), PHASE_TARGET
# (7795507), PHASE_WL (--dist zipf:1.2 --rw randrw:30 --pattern shift
# --period 33333).
set -eu
OUT=$1; A=$2; B=$3; ROUNDS=${4:-2}
TB=${TIER_BENCH:-$(dirname "$B")/../tools/tier-bench}
OPS=${PHASE_OPS:-200000}; QD=${PHASE_QD:-64}; SIZE=${PHASE_SIZE:-16G}
TARGET=${PHASE_TARGET:-7795507}
WL=${PHASE_WL:---dist zipf:1.2 --rw randrw:30 --pattern shift --period 33333}
. "$(dirname "$0")/bench-lib.sh"
mkdir -p "$OUT"

run() {   # run TIERD LABEL
	local T=$1 D=$OUT/$2 pid
	local U="nbd+unix:///vol0?socket=$D/nbd.sock"
	rm -rf "$D"; mkdir -p "$D/data"
	bench_model_conf "$D" "$SIZE" "$TARGET" hdd ssd
	"$T" --config "$D/tierd.conf" 2>"$D/tierd.log" &
	pid=$!
	for _ in $(seq 1 300); do
		[ -S "$D/nbd.sock" ] && nbdinfo --size "$U" >/dev/null 2>&1 && break
		kill -0 "$pid" 2>/dev/null || { cat "$D/tierd.log" >&2; exit 1; }
		sleep 0.1
	done
	# shellcheck disable=SC2086  # WL is a list of options
	"$TB" --uri "$U" --admin "$D/tierd.asok" --qd "$QD" --ops "$OPS" $WL --bs 4k \
		--label "$2" --csv "$D/out.csv" >"$D/out.txt"
	kill -TERM "$pid"
	wait "$pid" || { echo "tierd $2 exited with an error" >&2; exit 1; }
	rm -rf "$D/data"
	awk -F, -v l="$2" 'NR == 2 { printf "%-5s IOPS %s  lat mean %s ms  p99 %s ms  hit ratio %s  flushes %d  evictions %d  base B/client B %s\n", l, $11, $13, $15, $22, $20, $21, $24 }' "$D/out.csv"
}

for r in $(seq 1 "$ROUNDS"); do
	run "$A" "A-$r"
	run "$B" "B-$r"
done
