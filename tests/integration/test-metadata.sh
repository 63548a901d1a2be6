#!/bin/bash
# SPDX-License-Identifier: MIT
# The metadata benchmark's bounded run (tools/bench/bench-metadata.sh): lay out
# TIER_META_OBJECTS [50000] cached objects (object_size 8 KiB, extent_size
# 4 KiB: dirty, clean, and partly valid dirty and clean ones) with
# tier-mkpool, restart tierd on the pool, and check that the rebuilt map
# holds every object in its state (cached/dirty objects and bytes as laid
# out) and that the whole image reads back as laid out (dirty extents from
# the cache, the rest from base).  Asserts correctness, not timing.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
for v in TIERD TIERCTL MKPOOL; do
	[ -n "${!v:-}" ] || { echo "$v not set" >&2; exit 2; }
done
command -v nbdcopy >/dev/null || { echo "nbdcopy missing: skip"; exit 77; }
DIR=/dev/shm
[ -w "$DIR" ] || DIR=${TMPDIR:-/tmp}
ulimit -n 4096 2>/dev/null || true
export TIERD TIERCTL MKPOOL
BENCH_NO_BUILD=1 BENCH_VERIFY=1 BENCH_DIR=$DIR BENCH_OBJECTS=${TIER_META_OBJECTS:-50000} \
	BENCH_OBJECT_SIZE=8192 BENCH_EXTENT_SIZE=4096 BENCH_RESTARTS=2 \
	bash "$HERE/../../tools/bench/bench-metadata.sh"
