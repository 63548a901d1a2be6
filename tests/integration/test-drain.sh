#!/bin/bash
# SPDX-License-Identifier: MIT
# SIGTERM with requests in flight: tierd drains, exits 0, and every write it
# acknowledged reads back after a restart.  A second tierd on the same
# data_dir is refused while the first runs.
. "$(dirname "$0")/lib.sh"

IMAGE_SIZE=256M
TARGET_MAX=8M BASE_PROFILE=hdd CACHE_PROFILE=ssd write_config "promote_granularity = extent
min_write_recency_for_promote = 0"
start_tierd

log "a second tierd on the same data_dir is refused"
if "$TIERD" --config "$CONF" 2>"$WORK/second.log"; then
	fail "second tierd started"
fi
grep -q "in use by another tierd (pid $TIERD_PID)" "$WORK/second.log" ||
	{ cat "$WORK/second.log"; fail "second tierd did not name the holder"; }

log "fio and a checking writer keep requests in flight; then SIGTERM"
fio --name=load --ioengine=nbd --uri="$(uri)" --rw=randrw --bs=4k --iodepth=16 \
	--size=64M --offset=128M --random_distribution=zipf:1.1 --time_based --runtime=60 \
	> "$WORK/fio.out" 2>&1 &
fio_pid=$!
/usr/bin/python3 "$(dirname "$0")/nbd_drain.py" write "$SOCK" disk "$WORK/state.json" &
writer_pid=$!
sleep 3
kill -0 "$fio_pid" || { cat "$WORK/fio.out"; fail "fio ended early"; }
stop_tierd
wait "$writer_pid" || fail "writer saw no acknowledged write"
wait "$fio_pid" || true   # fio loses its server: an error is expected
grep -q "draining" "$LOG" || fail "no drain logged"

log "restart and read back every acknowledged write"
start_tierd
/usr/bin/python3 "$(dirname "$0")/nbd_drain.py" verify "$SOCK" disk "$WORK/state.json" ||
	fail "acknowledged writes lost"
stop_tierd
log "PASS"
