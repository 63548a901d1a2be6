#!/bin/bash
# SPDX-License-Identifier: MIT
# A zipf read load beside a sequential scan, real tierd on the local backend
# with the `hdd` base and `ssd` cache device models, two tierd binaries
# interleaved (docs/BENCHMARKS.md, "The policy suite").
#
# Usage: tools/bench/bench-scan.sh OUTDIR TIERD_A TIERD_B [ROUNDS]
#   TIERD_A, TIERD_B  tierd binaries (tier-bench: the one beside TIERD_A,
#                     ../tools/tier-bench of its build, or $TIER_BENCH)
#   ROUNDS            A/B pairs (default 2)
# Per run: a fresh 1 GiB image written through (cache_mode proxy, no device
# model, 1 MiB writes), then tierd with target_max_bytes 64M and the models:
# 20 s of zipf:1.1 4 KiB reads at QD 16 (warm-up), then 30 s of the same
# (seed 2, with the admin socket's counter deltas) beside a sequential 4 KiB
# read scan at QD 16.  Prints one line per run: the zipf load's IOPS, mean
# and p99 latency, hit ratio and base bytes per client byte (tierd's counters:
# both clients), and the scan's IOPS and mean latency.
# Env (the bounded run in tests/integration/test-bench.sh): SCAN_SIZE (1G),
# SCAN_TARGET (64M), SCAN_WARM (20 s), SCAN_RUNTIME (30 s).
set -eu
OUT=$1; A=$2; B=$3; ROUNDS=${4:-2}
TB=${TIER_BENCH:-$(dirname "$A")/../tools/tier-bench}
. "$(dirname "$0")/bench-lib.sh"
SIZE=${SCAN_SIZE:-1G}; TARGET=${SCAN_TARGET:-64M}
WARM=${SCAN_WARM:-20}; RUNTIME=${SCAN_RUNTIME:-30}
MIB=$(numfmt --from=iec "$SIZE"); MIB=$((MIB / 1048576))
mkdir -p "$OUT"

run() {   # run TIERD LABEL
	local T=$1 D=$OUT/$2 pid hp
	local U="nbd+unix:///vol0?socket=$D/nbd.sock"
	rm -rf "$D"; mkdir -p "$D/data"
	conf() { bench_model_conf "$D" "$SIZE" "$TARGET" "$1" "$2" "cache_mode = $3"; }
	start() {
		"$T" -c "$D/tierd.conf" >>"$D/tierd.log" 2>&1 &
		pid=$!
		for _ in $(seq 100); do [ -S "$D/nbd.sock" ] && return; sleep 0.1; done
		echo "bench-scan: tierd did not start ($D/tierd.log)" >&2; exit 1
	}
	stop() { kill "$pid"; wait "$pid" || true; rm -f "$D/nbd.sock"; }
	conf none none proxy; start
	"$TB" --uri "$U" --dist seq --rw write --bs 1M --qd 8 --ops "$MIB" --label fill >/dev/null
	stop
	conf hdd ssd writeback; start
	"$TB" --uri "$U" --dist zipf:1.1 --rw read --qd 16 --runtime "$WARM" --label warm >"$D/warm.txt"
	"$TB" --uri "$U" --dist zipf:1.1 --rw read --qd 16 --runtime "$RUNTIME" --seed 2 --label hot \
		--admin "$D/tierd.asok" >"$D/hot.txt" &
	hp=$!
	"$TB" --uri "$U" --dist seq --rw read --qd 16 --runtime "$RUNTIME" --label scan >"$D/scan.txt"
	wait "$hp"
	stop
	printf '%-8s zipf: IOPS %s mean %s ms p99 %s ms hit %s base B/client B %s | scan: IOPS %s mean %s ms\n' "$2" \
		$(grep -E '^(IOPS|lat mean|lat p99|hit ratio|base I/O)' "$D/hot.txt" | awk '{print $NF}') \
		$(grep -E '^(IOPS|lat mean)' "$D/scan.txt" | awk '{print $NF}')
}

for r in $(seq "$ROUNDS"); do
	run "$A" "A-$r"
	run "$B" "B-$r"
done
