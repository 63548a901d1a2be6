#!/bin/sh
# tools/bench/sim-suite.sh SIM OUTDIR - the eviction/admission workload suite of
# docs/BENCHMARKS.md ("The policy suite"): every workload x
# cache size x policy through tier-sim (the real engine, virtual time), one
# CSV per workload and cache, then the whole table and its summary on
# stdout (tools/bench/sim-suite.py).  Deterministic: the same tree prints the
# same numbers.
#
#   SUITE_OPS      requests per run (default 200000; the first 10% warm up)
#   SUITE_SIZE     image = footprint (default 1G: 256 objects of 4 MiB)
#   SUITE_CACHES   cache sizes in % of the footprint (default "5 10 25")
#   SUITE_CACHE_OF image (default: % of SUITE_SIZE, which the default 1G
#                  images are: every block is touched) or footprint (% of
#                  the 4 KiB blocks a run touches, tier-sim --cache P%: for
#                  wide images, e.g. SUITE_SIZE=16G, where a run touches a
#                  few percent of the image; docs/BENCHMARKS.md,
#                  "The policy suite")
#   SUITE_WORKLOADS  names to run (default all, see below)
#   SUITE_POLICIES   tier-sim policy specs, comma separated (default below)
#   SUITE_JOBS     runs at a time (default 2)
#   SUITE_ARGS     more tier-sim arguments for every run (e.g. "--seed 2")
# CI runs a bounded subset (tests/integration/test-sim-suite.sh).
set -eu
SIM=${1:?usage: sim-suite.sh path/to/tier-sim OUTDIR}
OUT=${2:?usage: sim-suite.sh path/to/tier-sim OUTDIR}
HERE=$(cd "$(dirname "$0")" && pwd)
OPS=${SUITE_OPS:-200000}
SIZE=${SUITE_SIZE:-1G}
CACHES=${SUITE_CACHES:-"5 10 25"}
CACHE_OF=${SUITE_CACHE_OF:-image}
case $CACHE_OF in image|footprint) ;; *) echo "sim-suite: SUITE_CACHE_OF must be image or footprint" >&2; exit 2 ;; esac
JOBS=${SUITE_JOBS:-2}
WARM=$((OPS / 10))
SHIFT=$((OPS / 6))
# Whole-object admission on every miss (the regime of the issue's trace:
# promote-always = recency 0, object granularity) with each eviction order,
# then tierd's defaults (extent admission) with each; tinylfu adds the
# frequency sketch to admission.
POLICIES=${SUITE_POLICIES:-"obj-hitset:promote-always,obj-lru:promote-always+evict_policy=lru,obj-arc:promote-always+evict_policy=arc,obj-s3fifo:promote-always+evict_policy=s3fifo,obj-arc-tlfu:promote-always+evict_policy=arc+admission=tinylfu,default,ext-lru:default+evict_policy=lru,ext-arc:default+evict_policy=arc,ext-s3fifo:default+evict_policy=s3fifo,ext-arc-tlfu:default+evict_policy=arc+admission=tinylfu"}

workload() {
	case $1 in
	zipf0.9) echo "--dist zipf:0.9 --rw randrw:30" ;;
	zipf1.1) echo "--dist zipf:1.1 --rw randrw:30" ;;
	zipf1.2) echo "--dist zipf:1.2 --rw randrw:30" ;;
	pareto) echo "--dist pareto:0.9 --rw randrw:30" ;;
	hotscan) echo "--dist zipf:1.1 --rw randrw:30 --pattern hotscan --hot-pct 20 --period 20000 --scan-len 4000" ;;
	loop) echo "--dist uniform --rw randrw:30 --pattern loop --period 256" ;;
	shift) echo "--dist zipf:1.2 --rw randrw:30 --pattern shift --period $SHIFT" ;;
	log) echo "--dist zipf:1.1 --rw randrw:30 --pattern log --hot-pct 20" ;;
	readmostly) echo "--dist zipf:1.1 --rw randrw:5" ;;
	vms) echo "--dist zipf:1.1 --rw write --pattern vms --parts 20" ;;
	*) echo "sim-suite: unknown workload $1" >&2; exit 2 ;;
	esac
}
WORKLOADS=${SUITE_WORKLOADS:-"zipf0.9 zipf1.1 zipf1.2 pareto hotscan loop shift log readmostly vms"}

mkdir -p "$OUT"
jobs=$OUT/jobs.txt
: >"$jobs"
size_b=$(numfmt --from=iec "$SIZE")
for w in $WORKLOADS; do
	args=$(workload "$w")
	for pct in $CACHES; do
		if [ "$CACHE_OF" = footprint ]; then cache=$pct%; else cache=$((size_b * pct / 100)); fi
		echo "$SIM $args --bs 4k --size $SIZE --cache $cache --qd 16 --ops $OPS --warmup $WARM --label $w@$pct% ${SUITE_ARGS:-} --policy $POLICIES --csv $OUT/$w-$pct.csv >$OUT/$w-$pct.txt 2>&1 || { echo FAILED: $w $pct >&2; exit 255; }" >>"$jobs"
	done
done
tr '\n' '\0' <"$jobs" | xargs -0 -P "$JOBS" -n 1 sh -c
python3 "$HERE/sim-suite.py" "$OUT"/*.csv
