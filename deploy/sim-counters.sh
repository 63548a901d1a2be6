#!/bin/sh
# deploy/sim-counters.sh SIM OUTDIR - run every tier-sim scenario of
# docs/BENCHMARKS.md (and a few more covering each cache mode and
# granularity) and write one CSV per run into OUTDIR.  Used to check that a
# refactoring of the engine leaves its decisions unchanged: run it before
# and after, then `diff -r`.  Two runs at a time; about 8 minutes on 2 cores.
set -eu
SIM=${1:?usage: sim-counters.sh path/to/tier-sim OUTDIR}
OUT=${2:?usage: sim-counters.sh path/to/tier-sim OUTDIR}
mkdir -p "$OUT"
W="--size 1G --cache 256M --warmup 2000"
jobs=$(mktemp)
trap 'rm -f "$jobs"' EXIT
for qd in 1 2 4 8 16; do
	for j in "" "--dev base.write_latency_us=1000"; do
		tag=qd$qd${j:+-journal}
		echo "$SIM --dist zipf:1.1 --rw write --bs 4k $W --qd $qd --ops 1000000 --seconds 300 $j --csv $OUT/$tag.csv" >>"$jobs"
		echo "$SIM --dist zipf:1.1 --rw write --bs 4k $W --qd $qd --ops 1000000 --seconds 300 $j --policy ceph --set promote_max_bytes_sec=0 --set promote_max_objects_sec=0 --csv $OUT/$tag-nothr.csv" >>"$jobs"
	done
done
for d in zipf:1.1 zipf:0.9 zipf:1.2 pareto:0.9 uniform; do
	for ev in hitset s3fifo; do
		echo "$SIM --dist $d $W --qd 16 --ops 2000000 --seconds 200 --policy promote-always,ceph,tierd --set evict_policy=$ev --csv $OUT/$d-$ev.csv" >>"$jobs"
	done
done
# each cache mode, both granularities, both write_miss, reads and mixes
for m in writeback readproxy readonly proxy none; do
	for g in object extent; do
		echo "$SIM --dist zipf:1.1 --rw randrw:50 $W --qd 8 --ops 200000 --seconds 100 --policy tierd --set cache_mode=$m --set promote_granularity=$g --csv $OUT/mode-$m-$g.csv" >>"$jobs"
	done
done
for wm in proxy promote; do
	echo "$SIM --dist zipf:1.1 --rw randrw:70 $W --qd 8 --ops 200000 --seconds 100 --policy ceph --set write_miss=$wm --set min_write_recency_for_promote=0 --csv $OUT/wmiss-$wm.csv" >>"$jobs"
done
echo "$SIM --dist zipf:1.1 --rw read $W --qd 16 --ops 300000 --seconds 100 --csv $OUT/read.csv" >>"$jobs"
echo "$SIM --dist zipf:1.1 --rw randrw:30 --bs 64k $W --qd 16 --ops 300000 --seconds 100 --csv $OUT/rw64k.csv" >>"$jobs"
xargs -P 2 -I CMD sh -c 'CMD >/dev/null 2>&1 || echo "FAILED: CMD"' <"$jobs"
ls "$OUT" | wc -l
