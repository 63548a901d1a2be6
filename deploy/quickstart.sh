#!/bin/bash
# SPDX-License-Identifier: MIT
# tierd quickstart: install deps, build, start tierd on the embedded local
# backend (HDD-modelled base pool, SSD-modelled cache pool), replay a fio
# zipf:1.1 4 KiB random write+read workload over NBD at queue depth 1 and 16
# for about a minute in total, print `tierctl status`, stop tierd cleanly.
#
# Environment: QUICKSTART_RUNTIME (seconds, default 60), BUILD_DIR (default
# ./build), QUICKSTART_DIR (state dir, default a fresh temp dir, removed at
# the end unless given), QUICKSTART_SIZE (image size, default 8G).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
RUNTIME=${QUICKSTART_RUNTIME:-60}
SIZE=${QUICKSTART_SIZE:-8G}
say() { printf '\n== %s\n' "$*"; }

say "dependencies"
if [ "$(id -u)" = 0 ] || ! command -v fio >/dev/null; then
	"$ROOT/deploy/install-deps.sh" --no-ceph
fi

say "build ($BUILD)"
[ -f "$BUILD/build.ninja" ] || meson setup "$BUILD" "$ROOT" >/dev/null
ninja -C "$BUILD" >/dev/null
TIERD=$BUILD/daemon/tierd
TIERCTL=$BUILD/tools/tierctl

if [ -n "${QUICKSTART_DIR:-}" ]; then
	STATE=$QUICKSTART_DIR
	mkdir -p "$STATE"
	KEEP=1
else
	STATE=$(mktemp -d /tmp/tierd-quickstart.XXXXXX)
	KEEP=0
fi
SOCK=$STATE/nbd.sock
ASOK=$STATE/tierd.asok
PID=
cleanup() {
	if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
		kill -KILL "$PID" 2>/dev/null || true
	fi
	[ "$KEEP" = 1 ] || rm -rf "$STATE"
}
trap cleanup EXIT

cat > "$STATE/tierd.conf" <<CFG
# written by deploy/quickstart.sh
[global]
backend = local
listen = unix:$SOCK
admin_socket = $ASOK
log_level = info

[local]
data_dir = $STATE/data
# A demo on one disk: device models make the base pool behave like an HDD
# and the cache pool like an SSD.  Off by default (none: the disks' own
# speed); a real deployment puts base_dir and cache_dir on two devices.
base_profile = hdd
cache_profile = ssd

[tier]
cache_mode = writeback
target_max_bytes = 1G
hit_set_period = 10s
hit_set_count = 4
# The defaults are tierd's own write path (tier_preset = tierd): a write miss
# writes only its 4 KiB extents into a new cache object (no 4 MiB read from
# the HDD pool), so every write is admitted; reads need recency 1 to promote.
# For Ceph's behaviour add  tier_preset = ceph  (docs/OPERATIONS.md).

[image.vol0]
size = $SIZE
CFG

say "start tierd (state in $STATE)"
"$TIERD" --config "$STATE/tierd.conf" 2> "$STATE/tierd.log" &
PID=$!
for _ in $(seq 1 300); do
	[ -S "$SOCK" ] && nbdinfo --size "nbd+unix:///vol0?socket=$SOCK" >/dev/null 2>&1 && break
	kill -0 "$PID" 2>/dev/null || { cat "$STATE/tierd.log"; exit 1; }
	sleep 0.1
done
nbdinfo "nbd+unix:///vol0?socket=$SOCK" | sed -n '1,4p'

run_fio() {   # queue depth, seconds
	fio --name="qd$1" --ioengine=nbd --uri="nbd+unix:///vol0?socket=$SOCK" \
		--rw=randrw --rwmixwrite=70 --bs=4k --iodepth="$1" \
		--random_distribution=zipf:1.1 --size="$SIZE" --norandommap \
		--time_based --runtime="$2" --ramp_time=2 \
		--output-format=terse --terse-version=3 |
		awk -F';' -v qd="$1" 'NF > 100 { split($71, p, "=");
			printf "  QD %-3s  read %8.0f IOPS  write %8.0f IOPS  total %8.0f IOPS  (write p99 %s us)\n",
			qd, $8, $49, $8 + $49, p[2] }'
}
half=$(( RUNTIME / 2 > 3 ? RUNTIME / 2 : 3 ))
say "fio: 4 KiB randrw 70% writes, zipf:1.1, ${half}s at QD 1 then ${half}s at QD 16"
run_fio 1 "$half" | tee "$STATE/fio.txt"
run_fio 16 "$half" | tee -a "$STATE/fio.txt"

say "tierctl status"
"$TIERCTL" --socket "$ASOK" status

say "stop"
kill -TERM "$PID"
rc=0
wait "$PID" || rc=$?
PID=
if [ "$rc" -ne 0 ]; then
	tail -n 20 "$STATE/tierd.log"
	echo "tierd exited with status $rc" >&2
	exit 1
fi
tail -n 3 "$STATE/tierd.log"
echo "tierd stopped cleanly; fio results in $STATE/fio.txt"
