#!/bin/bash
# SPDX-License-Identifier: MIT
# fio over NBD with crc32c verification: 4 KiB random writes at queue depth
# 16 with zipf:1.1 popularity (the seed workload's shape), then a verifying
# read of every block; then again after a restart (verify_only).
. "$(dirname "$0")/lib.sh"

: "${TIERCTL:?set TIERCTL to the tierctl binary}"
FIO_SIZE=${FIO_SIZE:-256M}
FIO_IO=${FIO_IO:-512M}

# small cache (48 MiB for a 256 MiB working set) so promotions, flushes and
# evictions all happen during the run; extent promotion keeps it quick
TARGET_MAX=48M write_config "promote_granularity = extent
min_write_recency_for_promote = 0"
start_tierd

fio_job() {
	fio --name=zipf --ioengine=nbd --uri="$(uri)" --rw=randwrite --bs=4k \
		--iodepth=16 --size="$FIO_SIZE" --io_size="$FIO_IO" \
		--random_distribution=zipf:1.1 --randseed=1234 \
		--verify=crc32c --serialize_overlap=1 --verify_fatal=1 \
		--output-format=terse --terse-version=3 "$@"
}

log "fio randwrite + verify, QD 16, zipf:1.1, $FIO_IO over $FIO_SIZE"
out=$(fio_job --do_verify=1) || { echo "$out"; fail "fio write+verify"; }
echo "$out" | awk -F";" 'NF > 100 { printf "fio: write %s IOPS, verify read %s IOPS, errors %s\n", $49, $8, $5 }'

# the loop's busy-poll (busy_poll_us, default 100): a QD 1 client's next
# request comes while the loop spins, so the spins find work; with
# threads > 1 the NBD I/O thread's loop spins too (tierd-loop-nbd), unless
# the spinning loops would leave no core free (then both are off)
loop_counter() {
	"$TIERCTL" --socket "$ASOK" perf dump "$1" "$2" |
		/usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]][sys.argv[2]])' "$1" "$2"
}
log "fio randread at QD 1 (the loop's busy-poll)"
out=$(fio --name=qd1 --ioengine=nbd --uri="$(uri)" --rw=randread --bs=4k --iodepth=1 \
	--size="$FIO_SIZE" --io_size=16M --randseed=99 --output-format=terse --terse-version=3) ||
	{ echo "$out"; fail "fio QD 1"; }
loops=tierd-loop spinning=1
[ "${TIERD_THREADS:-1}" -gt 1 ] && loops="tierd-loop tierd-loop-nbd" spinning=2
want=100000
[ $((spinning + 1)) -le "$(nproc)" ] || want=0
for l in $loops; do
	hits=$(loop_counter $l busy_poll_hits) || fail "perf dump $l"
	max=$(loop_counter $l busy_poll_max_ns)
	log "$l: busy_poll_max_ns $max, busy_poll_hits $hits, busy_poll_misses $(loop_counter $l busy_poll_misses) ($spinning loop(s), $(nproc) cores)"
	[ "$max" = $want ] || fail "$l: busy_poll_max_ns $max, not $want"
	if [ $want = 0 ]; then
		[ "$hits" = 0 ] || fail "$l: spun with the busy-poll off"
		grep -q "busy_poll_us 100: off" "$LOG" || fail "busy-poll off without a word in the log"
	else
		[ "$hits" -gt 0 ] || fail "$l: the busy-poll never found work"
	fi
done

stop_tierd
start_tierd
log "verify only, after a restart (the map is rebuilt from the cache pool)"
out=$(fio_job --verify_only) || { echo "$out"; fail "fio verify after restart"; }
stop_tierd
log "PASS"
