#!/bin/bash
# SPDX-License-Identifier: MIT
# fio over NBD with crc32c verification: 4 KiB random writes at queue depth
# 16 with zipf:1.1 popularity (the seed workload's shape), then a verifying
# read of every block; then again after a restart (verify_only).
. "$(dirname "$0")/lib.sh"

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

stop_tierd
start_tierd
log "verify only, after a restart (the map is rebuilt from the cache pool)"
out=$(fio_job --verify_only) || { echo "$out"; fail "fio verify after restart"; }
stop_tierd
log "PASS"
