#!/bin/bash
# SPDX-License-Identifier: MIT
# NBD_CMD_BLOCK_STATUS (base:allocation) with real clients: ranges in neither
# pool are holes (HOLE|ZERO) that nbdinfo --map and qemu-img map report and
# nbdcopy and qemu-img convert skip (they read a fraction of the image from
# the base pool, by tierd's own counters), cached and base objects are data,
# and the raw-socket cases of nbd_status.py (option haggling, malformed
# requests, the race rule).
. "$(dirname "$0")/lib.sh"
: "${TIERCTL:?set TIERCTL to the tierctl binary}"
OBJ=$((4 << 20))

write_config
printf '\n[image.sparse]\nsize = 256M\n' >> "$CONF"
start_tierd

# base pool read bytes, from perf dump (logger tierd-pool-base)
base_read_bytes() {
	"$TIERCTL" --socket="$ASOK" perf dump | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
v = d.get("tierd-pool-base", {}).get("read_bytes")
if v is None:
    sys.exit("no base pool read bytes in perf dump")
print(v)'
}

log "raw protocol cases (nbd_status.py)"
/usr/bin/python3 "$(dirname "$0")/nbd_status.py" "$SOCK" sparse ro $OBJ || fail "nbd_status.py"

log "an empty export is one hole"
out=$(nbdinfo --map "$(uri)")
[ "$(echo "$out" | awk '{print $1, $2, $3}')" = "0 536870912 3" ] || { echo "$out"; fail "empty map"; }

log "written objects are data, the rest holes (nbdinfo --map, qemu-img map)"
qemu-io -f raw -c 'write -P 0x11 1M 64k' -c 'write -P 0x22 100M 4k' \
	-c 'write -P 0x33 200M 8M' "$(uri)" > "$WORK/q.out" 2>&1 || { cat "$WORK/q.out"; fail "qemu-io"; }
want="0 4194304 0
4194304 100663296 3
104857600 4194304 0
109051904 100663296 3
209715200 8388608 0
218103808 318767104 3"
out=$(nbdinfo --map "$(uri)" | awk '{print $1, $2, $3}')
[ "$out" = "$want" ] || { echo "$out"; fail "map after writes (cached objects)"; }
qemu-img map --output=json -f raw "$(uri)" > "$WORK/map.json" || fail "qemu-img map"
/usr/bin/python3 - "$WORK/map.json" <<'PY' || fail "qemu-img map: data ranges"
import json, sys
m = json.load(open(sys.argv[1]))
data = [(e["start"], e["length"]) for e in m if e["data"]]
holes = [e for e in m if not e["data"]]
assert data == [(0, 4 << 20), (100 << 20, 4 << 20), (200 << 20, 8 << 20)], data
assert all(e["zero"] for e in holes), "a hole not reported as zero"
assert sum(e["length"] for e in m) == 512 << 20
PY

log "after flush + evict: base objects are data up to their size, holes past it"
"$TIERCTL" --socket="$ASOK" evict > /dev/null || fail "evict"
want="0 1114112 0
1114112 103743488 3
104857600 4096 0
104861696 104853504 3
209715200 8388608 0
218103808 318767104 3"
for i in $(seq 1 100); do
	out=$(nbdinfo --map "$(uri)" | awk '{print $1, $2, $3}')
	[ "$out" = "$want" ] && break
	sleep 0.2
done
[ "$out" = "$want" ] || { echo "$out"; fail "map from the base pool"; }

log "nbdcopy skips the holes: base read bytes with and without extents"
b0=$(base_read_bytes)
nbdcopy "$(uri)" null: || fail "nbdcopy"
b1=$(base_read_bytes)
nbdcopy --no-extents "$(uri)" null: || fail "nbdcopy --no-extents"
b2=$(base_read_bytes)
with=$((b1 - b0)) without=$((b2 - b1))
log "base pool bytes read: nbdcopy $with, nbdcopy --no-extents $without"
# data: 1.06 MiB + 4 KiB + 8 MiB; promotions may copy whole objects (12 MiB)
[ "$with" -le $((24 << 20)) ] || fail "nbdcopy read $with bytes from base (holes not skipped)"
[ "$without" -ge $((500 << 20)) ] || fail "control: --no-extents read only $without bytes"

log "the copies hold the right bytes (and are sparse)"
truncate -s 512M "$WORK/ref"
/usr/bin/python3 - "$WORK/ref" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    for off, ln, b in ((1 << 20, 64 << 10, 0x11), (100 << 20, 4096, 0x22), (200 << 20, 8 << 20, 0x33)):
        f.seek(off); f.write(bytes([b]) * ln)
PY
nbdcopy "$(uri)" "$WORK/copy" || fail "nbdcopy to a file"
cmp "$WORK/ref" "$WORK/copy" || fail "nbdcopy copy differs"
b3=$(base_read_bytes)
qemu-img convert -f raw -O raw "$(uri)" "$WORK/conv" || fail "qemu-img convert"
b4=$(base_read_bytes)
cmp "$WORK/ref" "$WORK/conv" || fail "qemu-img convert copy differs"
log "qemu-img convert read $((b4 - b3)) bytes from base; copy uses $(du -k "$WORK/conv" | cut -f1) KiB"
[ $((b4 - b3)) -le $((24 << 20)) ] || fail "qemu-img convert read $((b4 - b3)) bytes from base"

kill -0 "$TIERD_PID" || fail "tierd died"
stop_tierd
log "PASS"
