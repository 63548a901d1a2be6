#!/bin/bash
# SPDX-License-Identifier: MIT
# Seed 004's benchmark (20 VMs x fio 4k randwrite zipf:1.1 on RBD, working set
# 4x target_max_bytes) against tierd on the local backend: builds a release
# tree and runs `tier-bench scenario seed004` with the given options (default:
# all variants, base profiles hdd and hdd-journal, QD 1..16 per job, 10 s
# each, plus the fio check), leaving table, JSON, CSV and SVG in OUT_DIR.
#
# Environment: BUILD_DIR (default /tmp/build-seed004), OUT_DIR (default
# ./seed004-results).  Example: tools/bench/seed004.sh --base-profile hdd --runtime 5
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD_DIR:-/tmp/build-seed004}
OUT=${OUT_DIR:-$PWD/seed004-results}

[ -f "$BUILD/build.ninja" ] || meson setup "$BUILD" "$ROOT" --buildtype=release >/dev/null
ninja -C "$BUILD" daemon/tierd tools/tier-bench >/dev/null
mkdir -p "$OUT"
[ "$#" -gt 0 ] || set -- --fio-check
start=$(date +%s)
rc=0
"$BUILD/tools/tier-bench" scenario seed004 "$@" --json "$OUT/seed004.json" \
	--csv "$OUT/seed004.csv" --svg "$OUT/seed004.svg" | tee "$OUT/seed004.txt" || rc=$?
echo "wall time $(( $(date +%s) - start )) s; results in $OUT (exit $rc)"
exit "$rc"
