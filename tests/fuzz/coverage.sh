#!/bin/sh
# SPDX-License-Identifier: MIT
# Line and branch coverage of the fuzzed decoders, from running each fuzz
# target's regression driver over its corpus (clang source-based coverage).
#
# Usage: tests/fuzz/coverage.sh [EXTRA_CORPUS_ROOT]
#   EXTRA_CORPUS_ROOT  optional directory with <target>/ subdirectories run
#                      as well (e.g. build-libfuzzer/fuzz-corpus)
# Env: FUZZ_COV_BUILD=DIR (default build-fuzzcov)
# Needs clang and llvm-profdata/llvm-cov (Debian: clang, llvm).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${FUZZ_COV_BUILD:-$top/build-fuzzcov}
extra=${1:-}
profdata=$(command -v llvm-profdata || command -v llvm-profdata-14 || true)
cov=$(command -v llvm-cov || command -v llvm-cov-14 || true)
if ! command -v clang >/dev/null 2>&1 || [ -z "$profdata" ] || [ -z "$cov" ]; then
	echo "coverage: needs clang, llvm-profdata and llvm-cov" >&2
	exit 2
fi
if [ ! -d "$build" ]; then
	CC=clang meson setup "$build" "$top" -Dbuildtype=debug \
		-Dc_args='-fprofile-instr-generate -fcoverage-mapping' \
		-Dc_link_args='-fprofile-instr-generate' \
		-Dtests=disabled -Drados=disabled -Dtools=disabled -Dsystemd=disabled
fi
targets="meta hitset params config trace nbd"
exes=""
for t in $targets; do
	exes="$exes tests/fuzz/fuzz_$t"
done
# shellcheck disable=SC2086
ninja -C "$build" $exes >/dev/null

# target -> the files it is meant to cover
files_of() {
	case $1 in
	meta) echo libtier/meta.c ;;
	hitset) echo libtier/hitset.c ;;
	params) echo libtier/params.c ;;
	config) echo daemon/config.c ;;
	trace) echo tools/trace.c ;;
	nbd) echo daemon/nbd.c daemon/nbd-handshake.c ;;
	esac
}

for t in $targets; do
	exe="$build/tests/fuzz/fuzz_$t"
	dirs="$top/tests/fuzz/corpus/$t"
	if [ -n "$extra" ] && [ -d "$extra/$t" ] && [ -n "$(ls -A "$extra/$t")" ]; then
		dirs="$dirs $extra/$t"
	fi
	rm -f "$build/$t.profraw"
	# shellcheck disable=SC2086
	LLVM_PROFILE_FILE="$build/$t.profraw" "$exe" $dirs >/dev/null
	"$profdata" merge -sparse "$build/$t.profraw" -o "$build/$t.profdata"
	srcs=""
	for f in $(files_of "$t"); do
		srcs="$srcs $top/$f"
	done
	echo "== fuzz_$t"
	# shellcheck disable=SC2086
	"$cov" report "$exe" -instr-profile="$build/$t.profdata" $srcs |
		sed "s|$top/||"
done
