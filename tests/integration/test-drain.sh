#!/bin/bash
# SPDX-License-Identifier: MIT
# SIGTERM with requests in flight: tierd drains, exits 0, and every write it
# acknowledged reads back after a restart.  A second tierd on the same
# data_dir is refused while the first runs.  SIGTERM while the agent is busy
# flushing (dirty data far over its target, an hdd base): tierd still exits
# 0 at once, the dirty data left in the cache (it used to keep flushing and
# exit 1 at shutdown_timeout).
. "$(dirname "$0")/lib.sh"
: "${TIERCTL:?set TIERCTL to the tierctl binary}"

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

log "SIGTERM with the agent flushing: exit 0 well within shutdown_timeout"
rm -rf "$WORK/data"
IMAGE_SIZE=4G   # 4 KiB writes scattered over it: a base write per dirty extent to flush
TARGET_MAX=1G BASE_PROFILE=hdd CACHE_PROFILE=ssd write_config "promote_granularity = extent
min_write_recency_for_promote = 0
cache_target_dirty_ratio = 0.01
cache_target_dirty_high_ratio = 0.02"
sed -i -e "s|^\[global\]\$|[global]\nshutdown_timeout = 10s|" "$CONF"
start_tierd
fio --name=dirty --ioengine=nbd --uri="$(uri)" --rw=randwrite --bs=4k --iodepth=32 \
	--time_based --runtime=4 > "$WORK/fio2.out" 2>&1 ||
	{ cat "$WORK/fio2.out"; fail "fio failed"; }
dirty=$("$TIERCTL" --socket="$ASOK" perf dump | /usr/bin/python3 -c '
import json, sys
print(json.load(sys.stdin)["tierd"]["dirty_bytes"])') || fail "no dirty_bytes in perf dump"
log "dirty bytes at SIGTERM: $dirty"
[ "$dirty" -gt $((8 << 20)) ] || fail "too little dirty data to keep the agent busy ($dirty)"
t0=$(date +%s)
stop_tierd
t1=$(date +%s)
[ $((t1 - t0)) -lt 8 ] || fail "SIGTERM took $((t1 - t0)) s"
grep -q "dirty bytes stay in the cache" "$LOG" || fail "no dirty-bytes line at shutdown"
log "PASS"
