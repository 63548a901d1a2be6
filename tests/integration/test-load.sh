#!/bin/bash
# SPDX-License-Identifier: MIT
# Load: 64 NBD connections x queue depth 32 for TIER_LOAD_RUNTIME seconds
# (default 60) on the local backend (fio --ioengine=nbd, one libnbd
# connection per job, 4 KiB random read/write), then a verifying write pass
# (crc32c) on 8 connections.  Passes with 0 errors; prints IOPS, p50/p99/p99.9
# latency and tierd's peak RSS (VmHWM) for docs/SECURITY.md.
. "$(dirname "$0")/lib.sh"
IMAGE_SIZE=1G
RUNTIME=${TIER_LOAD_RUNTIME:-60}
JOBS=${TIER_LOAD_JOBS:-64}
QD=${TIER_LOAD_QD:-32}
TARGET_MAX=256M write_config
start_tierd

log "$JOBS connections x QD $QD for $RUNTIME s"
fio --name=load --ioengine=nbd --uri="$(uri)" --rw=randrw --rwmixread=50 --bs=4k \
	--iodepth="$QD" --numjobs="$JOBS" --size=16M --offset_increment=16M \
	--time_based --runtime="$RUNTIME" --group_reporting --output-format=json \
	--output="$WORK/load.json" > "$WORK/fio.out" 2>&1 || { cat "$WORK/fio.out"; fail "fio load"; }

hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$TIERD_PID/status")
/usr/bin/python3 - "$WORK/load.json" "$hwm" "$JOBS" "$QD" "$RUNTIME" <<'PY' || fail "load figures"
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
hwm_kib, jobs, qd, rt = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
err = j["error"]
p = lambda d, q: d["clat_ns"]["percentile"].get(q, 0) / 1e6
r, w = j["read"], j["write"]
print("LOAD %s conns x QD %s, %s s: read %.0f IOPS p50 %.2f ms p99 %.2f ms p99.9 %.2f ms; "
      "write %.0f IOPS p50 %.2f ms p99 %.2f ms p99.9 %.2f ms; errors %d; tierd peak RSS %.0f MiB"
      % (jobs, qd, rt, r["iops"], p(r, "50.000000"), p(r, "99.000000"), p(r, "99.900000"),
         w["iops"], p(w, "50.000000"), p(w, "99.000000"), p(w, "99.900000"), err, hwm_kib / 1024))
assert err == 0, "fio reported error %d" % err
assert r["total_ios"] > 0 and w["total_ios"] > 0, "no I/O done"
PY
log "verify pass: every block fio wrote carries its crc32c header"
fio --name=verify --ioengine=nbd --uri="$(uri)" --rw=randwrite --bs=4k --iodepth=32 \
	--numjobs=8 --size=2M --offset_increment=16M --verify=crc32c --do_verify=1 \
	--verify_fatal=1 > "$WORK/verify.out" 2>&1 || { tail -20 "$WORK/verify.out"; fail "fio verify"; }
grep -qi 'error' "$LOG" && { grep -i error "$LOG" | head; fail "errors in the tierd log"; }
kill -0 "$TIERD_PID" || fail "tierd died"
stop_tierd
log "PASS"
