#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs every tierd test on a fresh Debian 12 machine: installs what is needed,
# builds with -Werror and ASan/UBSan, runs the unit and integration suites,
# then starts a throw-away single-node Ceph cluster, runs the ceph suite
# against it and stops it again (also on failure).
#
# Usage: deploy/test.sh [BUILD_DIR]       (default build-test)
# Env:   TIER_TEST_SKIP_CEPH=1 runs without the ceph suite (says so loudly).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
build=${1:-build-test}

deploy/install-deps.sh

if [ ! -d "$build" ]; then
	meson setup "$build" -Dwerror=true -Db_sanitize=address,undefined \
		-Drados=enabled
fi
ninja -C "$build"
# The optimiser warns differently without sanitizers (maybe-uninitialized):
# compile a plain release build too, warnings as errors, not tested again.
if [ ! -d "$build-release" ]; then
	meson setup "$build-release" -Dwerror=true --buildtype=release >/dev/null
fi
ninja -C "$build-release"

# ASan: report leaks and stop at the first error; UBSan: fail on any report.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

meson test -C "$build" --suite unit --print-errorlogs
meson test -C "$build" --suite integration --print-errorlogs

# Coverage-guided fuzzing, bounded: TIER_FUZZ_SECONDS per target (default
# 15; 0 skips, and says so).  The long mode is FUZZ_RUNS=10000000
# tests/fuzz/run-libfuzzer.sh (docs/SECURITY.md).
fuzz_secs=${TIER_FUZZ_SECONDS:-15}
if [ "$fuzz_secs" -gt 0 ]; then
	FUZZ_BUILD="$top/$build-libfuzzer" tests/fuzz/run-libfuzzer.sh "$fuzz_secs"
else
	echo "test.sh: TIER_FUZZ_SECONDS=0: the bounded libFuzzer run was NOT done"
fi

# The Debian package, built, installed on this machine and checked, and the
# walk of docs/OPERATIONS.md run as written (deploy/package-test.sh; root,
# or sudo: it installs the package and makes a system user).
if [ "${TIER_TEST_SKIP_PACKAGE:-0}" = 1 ]; then
	echo "test.sh: TIER_TEST_SKIP_PACKAGE=1: the package test and the doc-test were NOT run"
elif [ "$(id -u)" = 0 ] || command -v sudo >/dev/null; then
	deploy/package-test.sh
else
	echo "test.sh: not root and no sudo: the package test and the doc-test were NOT run"
fi

if [ "${TIER_TEST_SKIP_CEPH:-0}" = 1 ]; then
	echo "test.sh: TIER_TEST_SKIP_CEPH=1: the ceph suite was NOT run"
	exit 0
fi
if [ -x deploy/ceph-test.sh ]; then
	deploy/ceph-test.sh "$build"
else
	echo "test.sh: no ceph suite yet (deploy/ceph-test.sh missing)"
fi
