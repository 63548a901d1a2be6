#!/bin/bash
# SPDX-License-Identifier: MIT
# The kernel NBD client recipe of docs/OPERATIONS.md against a real tierd:
# nbd-client -unix SOCKET /dev/nbdN -N EXPORT -b 4096 -C 2 (multi-conn),
# O_DIRECT writes through /dev/nbdN, read back through the block device and
# through libnbd (nbdcopy) from the export, then nbd-client -d.  Needs root,
# nbd-client and the kernel's nbd driver; exits 77 naming what is missing
# (e.g. a kernel built without CONFIG_BLK_DEV_NBD).
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: the kernel client needs root"; exit 77; }
command -v nbd-client >/dev/null || { echo "SKIP: nbd-client not installed (deploy/install-deps.sh)"; exit 77; }
if [ ! -d /sys/module/nbd ]; then
	if ! command -v modprobe >/dev/null || ! modprobe nbd nbds_max=16 2>/dev/null; then
		kcfg=$( (zcat /proc/config.gz 2>/dev/null || cat "/boot/config-$(uname -r)" 2>/dev/null) |
			grep -E '^(# )?CONFIG_BLK_DEV_NBD[ =]' || echo "kernel config not readable")
		mods=$([ -e /proc/modules ] && echo "module support on" || echo "no module support (/proc/modules absent)")
		echo "SKIP: no nbd driver in kernel $(uname -r): modprobe nbd failed or modprobe is missing; $kcfg; $mods"
		exit 77
	fi
fi
dev=
for d in /dev/nbd*; do
	[[ $d =~ ^/dev/nbd[0-9]+$ ]] || continue
	[ "$(cat "/sys/block/${d#/dev/}/size" 2>/dev/null || echo 1)" = 0 ] && { dev=$d; break; }
done
[ -n "$dev" ] || { echo "SKIP: no free /dev/nbdN"; exit 77; }
IMAGE_SIZE=64M
start_tierd
disconnect() { nbd-client -d "$dev" >/dev/null 2>&1 || true; }
trap 'disconnect; cleanup' EXIT

nbd-client -unix "$SOCK" "$dev" -N disk -b 4096 -C 2 || fail "nbd-client -unix $SOCK $dev -N disk -C 2"
for _ in $(seq 50); do [ "$(blockdev --getsize64 "$dev")" = $((64 << 20)) ] && break; sleep 0.1; done
[ "$(blockdev --getsize64 "$dev")" = $((64 << 20)) ] || fail "$dev size $(blockdev --getsize64 "$dev")"
head -c $((8 << 20)) /dev/urandom > "$WORK/pattern"
dd if="$WORK/pattern" of="$dev" bs=1M oflag=direct conv=fsync status=none || fail "dd to $dev"
dd if="$dev" of="$WORK/back" bs=1M count=8 iflag=direct status=none || fail "dd from $dev"
cmp "$WORK/pattern" "$WORK/back" || fail "read back through $dev differs"
nbdcopy "$(uri disk)" "$WORK/export.raw" || fail "nbdcopy of the export"
cmp -n $((8 << 20)) "$WORK/pattern" "$WORK/export.raw" || fail "the export differs from what $dev wrote"
conns=$(grep -c "nbd: new connection\|connection .* export disk" "$LOG" || true)
log "kernel client on $dev: 8 MiB written and read back through it and through libnbd ($conns connection lines)"
nbd-client -d "$dev" || fail "nbd-client -d $dev"
echo PASS
