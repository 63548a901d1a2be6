#!/bin/bash
# SPDX-License-Identifier: MIT
# The layout record (daemon/layout.c) with the real tierd on the local
# backend: a restart with another object_size or extent_size over existing
# data is refused with exit status 78, naming the key and both values, and
# nothing is served or changed; with the recorded values it serves the data
# as written; image sizes may change; a damaged record refuses the start;
# a configuration error also exits 78 (the unit's RestartPreventExitStatus).
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
"$PY" -c 'import nbd' 2>/dev/null || { echo "SKIP: python3-libnbd not installed"; exit 77; }
IMAGE_SIZE=64M

nbdpy() { "$PY" -c "import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
$2" "$(uri "${3:-disk}")"; }

# refused KEY WANT_TEXT: the start must fail with 78, naming KEY and the values
refused() {
	local out=$WORK/refused.log rc=0
	timeout 60 "$TIERD" --config "$CONF" > "$out" 2>&1 || rc=$?
	cat "$out" >> "$LOG"
	[ "$rc" -eq 78 ] || { cat "$out"; fail "start over a mismatched layout: exit $rc, want 78"; }
	grep -q "$1" "$out" || { cat "$out"; fail "the refusal does not say '$1'"; }
	[ -S "$SOCK" ] && nbdinfo --size "$(uri)" >/dev/null 2>&1 && fail "it served anyway"
	log "refused as expected: $(grep -m1 'layout' "$out")"
}

log "write with object_size 4M, extent_size 4K"
write_config "object_size = 4M
extent_size = 4096
promote_granularity = extent"
start_tierd
nbdpy disk "h.pwrite(b'\xa5' * 65536, 4 * 1024 * 1024 + 8192); h.pwrite(b'\x5a' * 4096, 0); h.flush()"
stop_tierd
grep -q "^object_size 4194304$" "$WORK/data/base/tier.layout" || fail "base pool has no layout record"
grep -q "^extent_size 4096$" "$WORK/data/cache/tier.layout" || fail "cache pool record lacks extent_size"
grep -q "^image disk rbd_data.disk 67108864$" "$WORK/data/cache/tier.layout" || fail "record lacks the image"
grep -q "layout: base pool: layout record written" "$LOG" || fail "the new record was not logged"

log "restart with object_size 1M: refused"
write_config "object_size = 1M
extent_size = 4096
promote_granularity = extent"
refused "object_size: the pool was laid out with 4194304, the configuration says 1048576"
log "restart with extent_size 64K: refused"
write_config "object_size = 4M
extent_size = 64K
promote_granularity = extent"
refused "extent_size: the pool was laid out with 4096, the configuration says 65536"
cmp -s <(printf '\xa5%.0s' $(seq 1 16)) <(dd if="$WORK/data/cache/rbd_data.disk.0000000000000001" bs=1 skip=8192 count=16 status=none) ||
	fail "a refused start changed the cache object"

log "restart with the recorded layout and a bigger image: the data as written"
IMAGE_SIZE=96M
write_config "object_size = 4M
extent_size = 4096
promote_granularity = extent"
start_tierd
nbdpy disk "
b = h.pread(65536, 4 * 1024 * 1024 + 8192)
assert b == b'\xa5' * 65536, b[:8]
assert h.pread(4096, 0) == b'\x5a' * 4096
assert h.get_size() == 96 * 1024 * 1024"
stop_tierd
grep -q "^image disk rbd_data.disk 100663296$" "$WORK/data/base/tier.layout" || fail "the record did not follow the new size"
grep -q "layout: base pool: layout record updated" "$LOG" || fail "the update was not logged"

log "a damaged record refuses the start"
cp "$WORK/data/base/tier.layout" "$WORK/layout.good"
printf 'tierd-layout 1\nobject_size 4194304\n' > "$WORK/data/base/tier.layout"
refused "base pool: tier.layout: incomplete record (no end line)"
cp "$WORK/layout.good" "$WORK/data/base/tier.layout"

log "changing object_size as docs/OPERATIONS.md says: export, new data_dir, import"
start_tierd
nbdcopy "$(uri disk)" "$WORK/disk.raw" || fail "nbdcopy export"
stop_tierd
mv "$WORK/data" "$WORK/data.old"
write_config "object_size = 1M
extent_size = 4096
promote_granularity = extent"
start_tierd
nbdcopy "$WORK/disk.raw" "$(uri disk)" || fail "nbdcopy import"
nbdpy disk "
assert h.pread(65536, 4 * 1024 * 1024 + 8192) == b'\xa5' * 65536
assert h.pread(4096, 0) == b'\x5a' * 4096"
stop_tierd
grep -q "^object_size 1048576$" "$WORK/data/base/tier.layout" || fail "the new pool's record"

log "a configuration error exits 78 too"
printf '[tier]\nobject_size = banana\n' > "$WORK/bad.conf"
rc=0; "$TIERD" --config "$WORK/bad.conf" >> "$LOG" 2>&1 || rc=$?
[ "$rc" -eq 78 ] || fail "a config error exited $rc, want 78"
rc=0; "$TIERD" --config "$WORK/bad.conf" --check >> "$LOG" 2>&1 || rc=$?
[ "$rc" -eq 78 ] || fail "--check of a bad config exited $rc, want 78"
start_tierd
stop_tierd
log "PASS"
