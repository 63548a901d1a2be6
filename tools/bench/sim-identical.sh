#!/bin/bash
# SPDX-License-Identifier: MIT
# tools/bench/sim-identical.sh SIM OUTDIR [REFDIR] - record what tier-sim
# prints over the scenarios the project runs, so that a refactor can show
# it changed no behaviour: run it with the tier-sim of the tree before
# (OUTDIR = the reference), then with the one after and REFDIR = that
# reference; it then diffs the two directories and exits 1 on any
# difference.  Deterministic (virtual time): only the wall-clock timing
# fields differ between runs of one tree, and they are removed (the "wall
# seconds" table row, the CSVs' last column wall_s).  What it records:
#
#   suite/    tools/bench/sim-suite.sh: its 10 workloads x caches 5% and 25%
#             x the 10 default policies and the 3 extra ones of
#             tests/integration/test-sim-suite.sh (object and extent
#             granularity, every eviction order, tinylfu), each run's full
#             table and CSV, and the summary table
#   runs/     single tier-sim runs: its defaults (no argument: 4G image, 1G
#             cache, 200k requests, promote-always, ceph, default), the cache
#             modes, write_miss=promote, read-only / write-only / sequential
#             / large and multi-object requests, qd 1 and 64, a tight cache
#             (flushes and evictions), evict_extents 0 and 1, object-count
#             targets, other devices, another seed, a wide image sized by
#             footprint, and the MSR / blkparse trace readers
#   traces/   the engine's debug route trace (-vv: one line per routed
#             piece and per agent decision) of a few of those runs, whole
#             (gzip -n)
#
#   SIM_OPS   requests per suite run (default 40000)
#   SIM_JOBS  runs at a time (default 1)
set -euo pipefail
SIM=${1:?usage: sim-identical.sh path/to/tier-sim OUTDIR [REFDIR]}
OUT=${2:?usage: sim-identical.sh path/to/tier-sim OUTDIR [REFDIR]}
REF=${3:-}
HERE=$(cd "$(dirname "$0")" && pwd)
OPS=${SIM_OPS:-40000}
JOBS=${SIM_JOBS:-1}
rm -rf "$OUT"
mkdir -p "$OUT/suite" "$OUT/runs" "$OUT/traces"

# --- the policy suite ---
SUITE_OPS=$OPS SUITE_CACHES="5 25" SUITE_JOBS=$JOBS \
SUITE_POLICIES="obj-hitset:promote-always,obj-lru:promote-always+evict_policy=lru,obj-arc:promote-always+evict_policy=arc,obj-s3fifo:promote-always+evict_policy=s3fifo,obj-arc-tlfu:promote-always+evict_policy=arc+admission=tinylfu,default,ext-lru:default+evict_policy=lru,ext-arc:default+evict_policy=arc,ext-s3fifo:default+evict_policy=s3fifo,ext-arc-tlfu:default+evict_policy=arc+admission=tinylfu,ext-w0:default+fill_window=0,ext-rule0:default+fill_budget_pct=0+fill_locality_pct=0,ext-noext:default+evict_extents=0" \
	"$HERE/sim-suite.sh" "$SIM" "$OUT/suite" >"$OUT/suite/table.md"
rm -f "$OUT/suite/jobs.txt"   # names the binary

# --- single runs: NAME then tier-sim's arguments ---
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
printf '%s\n' "128166372003061629,wdev,0,Read,8192,4096,2106" \
	"128166372003071629,wdev,0,Write,1048576,65536,1500" \
	"128166372013061629,wdev,0,Read,8192,4096,90" \
	"128166372023061629,wdev,0,Write,4190208,12288,90" >"$T/msr.csv"
printf '%s\n' "  8,0 3 1 0.000000000 697 Q W 223490 + 8 [kjournald]" \
	"  8,0 3 2 0.000010000 697 D W 223490 + 8 [kjournald]" \
	"  8,0 0 3 0.001000000 100 Q R 223490 + 8 [fio]" "CPU0 (8,0):" >"$T/blk.txt"
ALL=promote-always,ceph,default,obj-wpromote:ceph+write_miss=promote
Z="--dist zipf:1.1 --rw randrw:30 --size 1G --ops 40000 --warmup 4000"
RUNS=(
	"defaults|"
	"modes-writeback|$Z --cache 100M --policy $ALL"
	"modes-readproxy|$Z --cache 100M --policy $ALL --set cache_mode=readproxy"
	"modes-proxy|$Z --cache 100M --policy $ALL --set cache_mode=proxy"
	"modes-readonly|$Z --cache 100M --policy $ALL --set cache_mode=readonly"
	"modes-none|$Z --cache 100M --policy $ALL --set cache_mode=none"
	"write-only|--dist zipf:1.1 --rw write --size 1G --cache 100M --ops 40000 --policy $ALL"
	"read-only|--dist zipf:1.1 --rw read --size 1G --cache 100M --ops 40000 --policy $ALL"
	"write-heavy|--dist pareto:0.9 --rw randrw:70 --size 1G --cache 60M --ops 40000 --policy $ALL"
	"seq|--dist seq --rw randrw:50 --size 512M --cache 64M --ops 40000 --policy $ALL"
	"bs64k|$Z --bs 64k --cache 100M --policy $ALL"
	"bs1m|--dist zipf:1.1 --rw randrw:30 --size 1G --ops 8000 --bs 1M --cache 200M --policy $ALL"
	"bs6m-multiobj|--dist uniform --rw randrw:50 --size 1G --ops 3000 --bs 6M --cache 300M --policy $ALL"
	"unaligned-bs|$Z --bs 6k --cache 100M --policy $ALL"
	"qd1|$Z --qd 1 --cache 100M --policy $ALL"
	"qd64|$Z --qd 64 --cache 100M --policy $ALL"
	"tight|--dist uniform --rw randrw:60 --size 1G --ops 60000 --cache 20M --policy $ALL"
	"tight-noevdirty|--dist uniform --rw randrw:60 --size 1G --ops 40000 --cache 20M --policy $ALL --set agent_evict_dirty=0"
	"evict-ext|--dist zipf:0.9 --rw randrw:40 --size 1G --ops 40000 --cache 40M --policy ev0:default+evict_extents=0,ev1:default+evict_extents=1,ev2:default,arc:default+evict_policy=arc,s3:default+evict_policy=s3fifo"
	"objects-target|$Z --cache 1G --policy $ALL --set target_max_objects=20"
	"fill-window|$Z --cache 60M --policy w0:default+fill_window=0,w64k:default+fill_window=64k,w4m:default+fill_window=4M,b0:default+fill_budget_pct=0,b1000:default+fill_budget_pct=1000"
	"flush-age|$Z --cache 60M --policy $ALL --set cache_min_flush_age=50 --set cache_min_evict_age=50"
	"devices|$Z --cache 60M --policy $ALL --base-profile ssd --cache-profile none"
	"dev-slow|$Z --cache 60M --policy $ALL --dev base.write_latency_us=20000 --dev cache.queue_depth=2"
	"seed2|$Z --cache 100M --policy $ALL --seed 2"
	"seconds|--dist zipf:1.1 --rw randrw:30 --size 1G --ops 10000000 --seconds 2 --cache 100M --policy $ALL"
	"hotscan|--dist zipf:1.1 --rw randrw:30 --pattern hotscan --hot-pct 20 --period 8000 --scan-len 2000 --size 1G --ops 40000 --cache 100M --policy $ALL"
	"vms|--dist zipf:1.1 --rw write --pattern vms --parts 20 --size 1G --ops 40000 --cache 100M --policy $ALL"
	"wide-footprint|--dist zipf:1.2 --rw randrw:30 --pattern shift --period 6666 --bs 4k --size 16G --cache 10% --ops 40000 --warmup 4000 --policy default,ext-lru:default+evict_policy=lru"
	"trace-msr|--trace $T/msr.csv --cache 16M --policy $ALL"
	"trace-blk|--trace $T/blk.txt --cache 16M --policy $ALL"
	"trace-msr-nostall|--trace $T/msr.csv --no-stall --cache 16M --policy $ALL"
)
# The wall-clock fields: the table's "wall seconds" row, the CSV's last column.
strip() { grep -v '^wall seconds ' "$1" >"$1.tmp"; mv "$1.tmp" "$1"; }
strip_csv() { sed 's/,[^,]*$//' "$1" >"$1.tmp"; mv "$1.tmp" "$1"; }
for r in "${RUNS[@]}"; do
	name=${r%%|*}
	# shellcheck disable=SC2086
	nice -n 10 "$SIM" ${r#*|} --csv "$OUT/runs/$name.csv" >"$OUT/runs/$name.txt" 2>&1 ||
		echo "exit $?" >>"$OUT/runs/$name.txt"
done
for f in "$OUT"/suite/*.txt "$OUT"/runs/*.txt; do strip "$f"; done
for f in "$OUT"/suite/*.csv "$OUT"/runs/*.csv; do strip_csv "$f"; done
sed -i 's|'"$T"'|TMP|g' "$OUT"/runs/*.txt "$OUT"/runs/*.csv

# --- route traces ---
TRACES=(
	"ext-zipf|$Z --cache 50M --policy default"
	"ext-tight|--dist uniform --rw randrw:60 --size 512M --ops 20000 --cache 10M --policy default"
	"obj-tight|--dist uniform --rw randrw:60 --size 512M --ops 20000 --cache 10M --policy promote-always"
	"obj-wpromote|$Z --cache 50M --policy ceph+write_miss=promote"
	"ext-multiobj|--dist uniform --rw randrw:50 --size 512M --ops 2000 --bs 6M --cache 100M --policy default"
	"ext-qd64-noevdirty|$Z --qd 64 --cache 30M --policy default --set agent_evict_dirty=0"
)
for r in "${TRACES[@]}"; do
	name=${r%%|*}
	# shellcheck disable=SC2086
	nice -n 10 "$SIM" ${r#*|} -vv 2>&1 >/dev/null | gzip -n >"$OUT/traces/$name.gz"
done

if [ -n "$REF" ]; then
	if diff -r "$REF" "$OUT" >"$OUT.diff"; then
		echo "sim-identical: $OUT matches $REF ($(find "$OUT" -type f | wc -l) files)"
	else
		echo "sim-identical: $OUT DIFFERS from $REF: $OUT.diff" >&2
		exit 1
	fi
fi
