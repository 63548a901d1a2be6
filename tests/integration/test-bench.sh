#!/bin/bash
# SPDX-License-Identifier: MIT
# tier-bench end to end against a real tierd (not its speed): a short
# zipf:1.1 randrw run at QD 1 and 4 with --verify must complete with non-zero
# IOPS, no bad blocks, a JSON and a CSV that parse, and tierd counter deltas
# that equal what the client sent (so the admin socket was read before and
# after each run) with promotions (or fills) and flushes moving in a small
# cache.  Then
# the negative controls: --verify must fail against a server that drops
# writes (nbdkit null), and an unreachable URI must fail.  And a bounded run
# of tools/bench/bench-scan.sh and of tools/bench/bench-phase.sh (their lines carry
# non-zero IOPS for both tierds), and --pattern (tier-sim's patterns)
# reaches the generator.
. "$(dirname "$0")/lib.sh"

: "${TIER_BENCH:?set TIER_BENCH to the tier-bench binary}"
command -v jq >/dev/null || { echo "SKIP: jq not installed"; exit 77; }

# 16 MiB cache for a 128 MiB image: promotions, flushes and evictions all
# happen within seconds; no device model so the run is short
IMAGE_SIZE=128M TARGET_MAX=16M write_config "promote_granularity = extent
min_write_recency_for_promote = 0
cache_target_dirty_ratio = 0.1
cache_target_full_ratio = 0.5"
start_tierd

log "tier-bench: zipf:1.1 randrw:70, QD 1 and 4, 2 s each, --verify"
"$TIER_BENCH" --uri "$(uri)" --admin "$ASOK" --qd 1,4 --runtime 2 \
	--dist zipf:1.1 --rw randrw:70 --bs 4k --verify --label it \
	--json "$WORK/out.json" --csv "$WORK/out.csv" > "$WORK/table.txt" ||
	{ cat "$WORK/table.txt"; fail "tier-bench exited with status $?"; }
cat "$WORK/table.txt"

J=$WORK/out.json
jq -e . "$J" >/dev/null || fail "JSON does not parse"
[ "$(jq '.runs | length' "$J")" = 2 ] || fail "expected 2 runs"
[ "$(jq -c '[.runs[].qd]' "$J")" = "[1,4]" ] || fail "runs are not QD 1 and 4"
jq -e 'all(.runs[]; .iops > 0 and .ops > 0 and .io_errors == 0)' "$J" >/dev/null ||
	fail "a run with no IOPS or with I/O errors"
jq -e 'all(.runs[]; .verified > 0 and .verify_errors == 0)' "$J" >/dev/null ||
	fail "verification checked nothing or found bad blocks"
jq -e 'all(.runs[]; .lat_p50_ms > 0 and .lat_p50_ms <= .lat_p99_ms and .lat_p99_ms <= .lat_max_ms)' \
	"$J" >/dev/null || fail "latency percentiles out of order"
# tierd counted exactly the requests tier-bench completed in each run
jq -e 'all(.runs[]; .tierd_delta.write_ops == .write_ops and .tierd_delta.read_ops == .read_ops
	and .tierd_delta.write_bytes == .write_ops * 4096)' "$J" >/dev/null ||
	fail "tierd's counter deltas differ from the client's request counts"
# data copied from base into the cache: whole objects (promotions) or the
# missing extents of partly valid copies (fills; they share the throttle)
jq -e '[.runs[].tierd_delta | .promotions + .fills] | add > 0' "$J" >/dev/null ||
	fail "no promotions or fills counted"
jq -e '[.runs[].tierd_delta.flushes] | add > 0' "$J" >/dev/null || fail "no flushes counted"
jq -e 'all(.runs[]; .hit_ratio > 0 and .hit_ratio <= 1)' "$J" >/dev/null || fail "hit ratio out of range"

[ "$(wc -l < "$WORK/out.csv")" = 3 ] || fail "CSV should have a header and 2 rows"
head -1 "$WORK/out.csv" | grep -q '^label,qd,ops,' || fail "CSV header"
awk -F, 'NR > 1 && ($1 != "it" || $11 <= 0) { bad = 1 } END { exit bad }' "$WORK/out.csv" ||
	fail "CSV rows lack the label or IOPS"
grep -q '^IOPS ' "$WORK/table.txt" || fail "table has no IOPS row"

# --pattern reaches the generator: log over reads appends every other
# request (a write past the hot part), so half of them are writes
log "tier-bench --pattern log --rw read: half the requests are appends"
"$TIER_BENCH" --uri "$(uri)" --qd 2 --ops 2000 --dist zipf:1.1 --rw read --pattern log \
	--hot-pct 20 --bs 4k --csv "$WORK/log.csv" > "$WORK/log.txt" ||
	{ cat "$WORK/log.txt"; fail "tier-bench --pattern log exited with status $?"; }
grep -q ': zipf:1.1 pattern log read bs 4096' "$WORK/log.txt" ||
	fail "the table does not name the pattern: $(head -1 "$WORK/log.txt")"
awk -F, 'NR == 2 && $6 == 1000 && $5 == 1000 { ok = 1 } END { exit !ok }' "$WORK/log.csv" ||
	fail "--pattern log: not half writes: $(cat "$WORK/log.csv")"
if "$TIER_BENCH" --uri "$(uri)" --qd 1 --ops 1 --pattern zigzag 2>"$WORK/pat.err" >/dev/null; then
	fail "--pattern zigzag accepted"
fi
grep -q -- "--pattern: plain, hotscan, shift, log, vms or loop, got 'zigzag'" "$WORK/pat.err" ||
	fail "bad --pattern error: $(cat "$WORK/pat.err")"
stop_tierd

if command -v nbdkit >/dev/null; then
	log "negative control: --verify against nbdkit null (drops writes) must fail"
	nbdkit -f -U "$WORK/null.sock" null 1M &
	NBDKIT_PID=$!
	for _ in $(seq 1 50); do [ -S "$WORK/null.sock" ] && break; sleep 0.1; done
	rc=0
	"$TIER_BENCH" --uri "nbd+unix:///?socket=$WORK/null.sock" --qd 2 --ops 300 \
		--dist uniform --rw randrw:50 --verify > /dev/null 2>"$WORK/null.err" || rc=$?
	kill "$NBDKIT_PID"
	wait "$NBDKIT_PID" 2>/dev/null || true
	[ "$rc" = 1 ] || fail "tier-bench --verify exited $rc against a server that loses data"
	grep -q 'blocks failed verification' "$WORK/null.err" || fail "no verification failure reported"
fi

log "tools/bench/bench-scan.sh, bounded: a zipf load beside a scan, one A/B round"
SCAN_SIZE=64M SCAN_TARGET=8M SCAN_WARM=1 SCAN_RUNTIME=2 TIER_BENCH="$TIER_BENCH" \
	bash "$(dirname "$0")/../../tools/bench/bench-scan.sh" "$WORK/scan" "$TIERD" "$TIERD" 1 \
	>"$WORK/scan.out" 2>"$WORK/scan.err" || { cat "$WORK/scan.err" >&2; fail "bench-scan.sh failed"; }
[ "$(grep -cE '^[AB]-1 +zipf: IOPS [1-9][0-9]* .* scan: IOPS [1-9][0-9]* ' "$WORK/scan.out")" = 2 ] ||
	{ cat "$WORK/scan.out" >&2; fail "bench-scan.sh: no IOPS for both runs"; }

log "tools/bench/bench-phase.sh, bounded: a moving hot spot at QD 16, one A/B round"
PHASE_OPS=3000 PHASE_QD=16 PHASE_SIZE=1G PHASE_TARGET=8M TIER_BENCH="$TIER_BENCH" \
	bash "$(dirname "$0")/../../tools/bench/bench-phase.sh" "$WORK/phase" "$TIERD" "$TIERD" 1 \
	>"$WORK/phase.out" 2>"$WORK/phase.err" || { cat "$WORK/phase.err" >&2; fail "bench-phase.sh failed"; }
[ "$(grep -cE '^[AB]-1 +IOPS [1-9][0-9.]* .* hit ratio 0\.[0-9]+ ' "$WORK/phase.out")" = 2 ] ||
	{ cat "$WORK/phase.out" >&2; fail "bench-phase.sh: no IOPS or hit ratio for both runs"; }

log "an unreachable URI is an error"
if "$TIER_BENCH" --uri "nbd+unix:///disk?socket=$WORK/nothing.sock" --qd 1 --ops 1 \
	>/dev/null 2>&1; then
	fail "tier-bench succeeded without a server"
fi
log "PASS"
