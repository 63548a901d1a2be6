#!/bin/bash
# SPDX-License-Identifier: MIT
# Real NBD clients against tierd: nbdinfo, nbdcopy, qemu-img, qemu-io,
# two connections writing disjoint ranges then a flush.
. "$(dirname "$0")/lib.sh"

write_config
start_tierd

log "nbdinfo --list names both exports with their sizes"
out=$(nbdinfo --list "$(uri)")
echo "$out" | grep -q 'export="disk"' || fail "disk not listed"
echo "$out" | grep -q 'export="ro"' || fail "ro not listed"
echo "$out" | grep -q 'export-size: 536870912' || fail "disk size wrong"
echo "$out" | grep -q 'export-size: 16777216' || fail "ro size wrong"
[ "$(nbdinfo --is read-only "$(uri ro)"; echo $?)" = 0 ] || fail "ro export not read-only"
nbdinfo --can flush "$(uri)" || fail "disk cannot flush"
nbdinfo --can multi-conn "$(uri)" || fail "disk without multi-conn"

log "nbdcopy round-trips 256 MiB of random data"
head -c 256M /dev/urandom > "$WORK/rnd"
nbdcopy "$WORK/rnd" "$(uri)"
nbdcopy "$(uri)" "$WORK/back"
cmp -n $((256 << 20)) "$WORK/rnd" "$WORK/back" || fail "nbdcopy data differs"
rm -f "$WORK/back"

log "qemu-img compare sees the same bytes (and notices a change)"
qemu-img compare -f raw -F raw "$WORK/rnd" "$(uri)" || fail "qemu-img compare"
# flip a bit of the byte there (writing a fixed 'X' changed nothing when the
# random byte was 'X' already: this check failed 1 run in 256)
b=$(od -An -tu1 -j 12345678 -N 1 "$WORK/rnd" | tr -d ' ')
printf "\\$(printf '%03o' $((b ^ 1)))" | dd of="$WORK/rnd" bs=1 seek=12345678 conv=notrunc status=none
[ "$(od -An -tu1 -j 12345678 -N 1 "$WORK/rnd" | tr -d ' ')" = $((b ^ 1)) ] || fail "the test's byte flip"
if qemu-img compare -q -f raw -F raw "$WORK/rnd" "$(uri)"; then
	fail "qemu-img compare missed a changed byte"
fi
rm -f "$WORK/rnd"

log "qemu-io pattern writes and reads, unaligned offsets and lengths"
qemu-io -f raw \
	-c 'write -P 0xab 1000 5000' -c 'read -P 0xab 1000 5000' \
	-c 'write -P 0xcd 4194000 9000' -c 'read -P 0xcd 4194000 9000' \
	-c 'read -P 0xab 1000 5000' \
	-c 'write -z 2000 1000' -c 'read -P 0 2000 1000' -c 'read -P 0xab 3000 3000' \
	-c 'discard 8388608 4194304' -c 'flush' \
	-c 'write -P 0x5a 536866816 4096' -c 'read -P 0x5a 536866816 4096' \
	"$(uri)" > "$WORK/qio.out" 2>&1 || { cat "$WORK/qio.out"; fail "qemu-io"; }
grep -qi 'pattern verification failed\|error' "$WORK/qio.out" && { cat "$WORK/qio.out"; fail "qemu-io pattern"; }
if qemu-io -f raw -c 'read -P 0xee 1000 5000' "$(uri)" > "$WORK/qio2.out" 2>&1 &&
   ! grep -q 'Pattern verification failed' "$WORK/qio2.out"; then
	fail "qemu-io accepted a wrong pattern"
fi
if qemu-io -f raw -c 'write -P 1 0 4096' "$(uri ro)" > "$WORK/qio3.out" 2>&1 &&
   ! grep -qi 'error\|denied\|read-only' "$WORK/qio3.out"; then
	cat "$WORK/qio3.out"; fail "write to read-only export succeeded"
fi

log "two connections write disjoint ranges at once, then a flush on one"
qemu-io -f raw -c 'write -P 0x11 64M 24M' "$(uri)" > "$WORK/a.out" 2>&1 &
pa=$!
qemu-io -f raw -c 'write -P 0x22 88M 24M' -c 'flush' "$(uri)" > "$WORK/b.out" 2>&1 &
pb=$!
wait $pa || fail "writer A"
wait $pb || fail "writer B"
qemu-io -f raw -c 'read -P 0x11 64M 24M' -c 'read -P 0x22 88M 24M' "$(uri)" > "$WORK/c.out" 2>&1
grep -q 'Pattern verification failed' "$WORK/c.out" && fail "multi-conn data wrong"

log "requests up to 64 MiB (the block size maximum advertised; over it: nbd_abuse.py)"
nbdinfo --json "$(uri)" | grep -q '"block_size_maximum": 67108864' || fail "block size maximum is not 64 MiB"
/usr/bin/python3 - "$(uri)" <<'PY' || fail "64 MiB requests"
import nbd, os, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
data = os.urandom(64 << 20)
h.pwrite(data, 128 << 20)
assert h.pread(64 << 20, 128 << 20) == data, "64 MiB read differs"
PY

log "fast zero: advertised; an aligned range zeroes, an unaligned one fails fast untouched"
nbdinfo --can fast-zero "$(uri)" || fail "NBD_FLAG_SEND_FAST_ZERO not advertised"
qemu-io -f raw -c 'write -P 0x33 1M 2M' -c 'write -z -n 1M 1M' -c 'read -P 0 1M 1M' \
	-c 'read -P 0x33 2M 1M' "$(uri)" > "$WORK/z.out" 2>&1 || { cat "$WORK/z.out"; fail "fast zero"; }
grep -qi 'fail\|error' "$WORK/z.out" && { cat "$WORK/z.out"; fail "fast zero of an aligned range"; }
if qemu-io -f raw -c 'write -z -n 2049k 3000' "$(uri)" > "$WORK/z2.out" 2>&1 &&
   ! grep -qi 'not supported' "$WORK/z2.out"; then
	cat "$WORK/z2.out"; fail "an unaligned fast zero did not fail with ENOTSUP"
fi
grep -qi 'not supported' "$WORK/z2.out" || { cat "$WORK/z2.out"; fail "unaligned fast zero: not ENOTSUP"; }
qemu-io -f raw -c 'read -P 0x33 2M 1M' "$(uri)" > "$WORK/z3.out" 2>&1
grep -q 'Pattern verification failed' "$WORK/z3.out" && fail "a refused fast zero changed data"
qemu-io -f raw -c 'write -z 2049k 3000' -c 'read -P 0 2049k 3000' -c 'read -P 0x33 2M 1k' \
	"$(uri)" > "$WORK/z4.out" 2>&1
grep -qi 'fail\|error' "$WORK/z4.out" && { cat "$WORK/z4.out"; fail "the same zero without -n"; }

stop_tierd

log "after a restart the data is still there"
start_tierd
qemu-io -f raw -c 'read -P 0x11 64M 24M' -c 'read -P 0x22 88M 24M' -c 'read -P 0xab 3000 3000' \
	"$(uri)" > "$WORK/d.out" 2>&1
grep -q 'Pattern verification failed' "$WORK/d.out" && fail "data lost across restart"
stop_tierd
log "PASS"
