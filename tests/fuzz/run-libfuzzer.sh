#!/bin/sh
# SPDX-License-Identifier: MIT
# Coverage-guided fuzzing of tierd's decoders with clang's libFuzzer.
#
# Usage: tests/fuzz/run-libfuzzer.sh [SECONDS] [TARGET...]
#   The long mode, one target at a time at the lowest priority:
#     FUZZ_RUNS=10000000 nice -n 19 tests/fuzz/run-libfuzzer.sh 21600 hitset
#   (params with FUZZ_ARGS=-max_len=1024: its inputs otherwise grow to 4 KiB
#   of lines and its rate falls sixfold; docs/SECURITY.md)
#   SECONDS  run time per target (default 60)
#   TARGET   meta hitset params config trace nbd (default: all)
# Env:
#   FUZZ_BUILD=DIR          build directory (default build-libfuzzer)
#   FUZZ_RUNS=N             the long mode: stop each target after N
#                           executions instead of SECONDS (docs/SECURITY.md
#                           reports FUZZ_RUNS=10000000); SECONDS is then
#                           only a safety cap (default 6 h)
#   FUZZ_FORK=N             libFuzzer's fork mode: N worker processes
#                           (-fork=N), restarted every few minutes with a
#                           share of the corpus; runs= is then the total of
#                           the workers' executions as the parent reports it
#                           ("#N: cov: ..." lines), exec/s that total over
#                           the parent's time.  Crashes stop the run as usual
#   FUZZ_ARGS="..."         more libFuzzer flags, e.g. for fuzz_nbd's long
#                           run -entropic_scale_per_exec_time=1 (schedule
#                           fast inputs more: tests/fuzz/README.md)
#   FUZZ_RSS_MB=N           libFuzzer's -rss_limit_mb and -malloc_limit_mb
#                           (default 2048): the memory cap.  `ulimit -v`
#                           does not work with ASan, which reserves ~20 TiB
#                           of virtual address space for its shadow
#   FUZZ_UPDATE_CORPUS=1    merge what was found, minimised, into
#                           tests/fuzz/corpus/<target>/ (review, then commit)
#
# Needs clang with the libFuzzer runtime.  On Debian 12:
#   apt-get install clang libclang-rt-14-dev
# (deploy/install-deps.sh installs them; deploy/test.sh runs this for
# TIER_FUZZ_SECONDS per target after the corpora ran through the gcc build
# as the unit tests fuzz_<target>).
# Crashes land in $FUZZ_BUILD/fuzz-artifacts/<target>/; reproduce one with
#   $FUZZ_BUILD/tests/fuzz/fuzz_<target> FILE
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${FUZZ_BUILD:-$top/build-libfuzzer}
secs=${1:-60}
want_runs=${FUZZ_RUNS:-}
[ -n "$want_runs" ] && [ $# -eq 0 ] && secs=21600
[ $# -gt 0 ] && shift
targets=${*:-meta hitset params config trace nbd}

if ! command -v clang >/dev/null 2>&1; then
	echo "run-libfuzzer: clang not found (apt-get install clang libclang-rt-14-dev)" >&2
	exit 2
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
	>"$probe/p.c"
if ! clang -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" 2>"$probe/err"; then
	echo "run-libfuzzer: clang has no libFuzzer runtime (apt-get install libclang-rt-14-dev):" >&2
	cat "$probe/err" >&2
	exit 2
fi

if [ ! -d "$build" ]; then
	CC=clang meson setup "$build" "$top" -Db_sanitize=address,undefined \
		-Db_lundef=false -Dc_args='-fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined' \
		-Dtests=disabled -Drados=disabled -Dtools=disabled -Dsystemd=disabled
fi
exes=""
for t in $targets; do
	exes="$exes tests/fuzz/fuzz_$t"
done
# shellcheck disable=SC2086
ninja -C "$build" $exes

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
summary="$build/fuzz-summary.txt"
: >"$summary"
status=0
for t in $targets; do
	exe="$build/tests/fuzz/fuzz_$t"
	seeds="$top/tests/fuzz/corpus/$t"
	work="$build/fuzz-corpus/$t"
	art="$build/fuzz-artifacts/$t"
	log="$build/fuzz-$t.log"
	mkdir -p "$work" "$art"
	dict=""
	[ -f "$top/tests/fuzz/$t.dict" ] && dict="-dict=$top/tests/fuzz/$t.dict"
	echo "== fuzz_$t: ${secs}s${FUZZ_FORK:+, $FUZZ_FORK workers}, log $log"
	rc=0
	# shellcheck disable=SC2086
	"$exe" $dict -max_total_time="$secs" ${want_runs:+-runs=$want_runs} -print_final_stats=1 \
		${FUZZ_FORK:+-fork=$FUZZ_FORK} ${FUZZ_ARGS:-} \
		-rss_limit_mb="${FUZZ_RSS_MB:-2048}" -malloc_limit_mb="${FUZZ_RSS_MB:-2048}" \
		-artifact_prefix="$art/" "$work" "$seeds" >"$log" 2>&1 || rc=$?
	if [ -n "${FUZZ_FORK:-}" ]; then
		# the parent's last "#RUNS: cov: C ft: F corp: N exec/s E ... time: Ts"
		# line (E is the last job's own rate: exec/s here is RUNS / T)
		last=$(grep -E '^#[0-9]+: cov: ' "$log" | tail -1)
		runs=$(echo "$last" | sed -n 's/^#\([0-9]*\):.*/\1/p')
		took=$(echo "$last" | sed -n 's/.* time: \([0-9]*\)s.*/\1/p')
		eps=""
		[ -n "$runs" ] && [ -n "$took" ] && [ "$took" -gt 0 ] && eps=$((runs / took))
	else
		runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
		eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	fi
	cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1)
	crashes=$(find "$art" -type f | wc -l)
	line="fuzz_$t: ${secs}s${FUZZ_FORK:+ fork=$FUZZ_FORK} runs=${runs:-?} exec/s=${eps:-?} ${cov:-cov: ?} artifacts=$crashes rc=$rc"
	echo "$line" | tee -a "$summary"
	if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
		status=1
		grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | head -20 || true
	fi
	if [ "${FUZZ_UPDATE_CORPUS:-0}" = 1 ]; then
		merged="$build/fuzz-merged/$t"
		rm -rf "$merged"
		mkdir -p "$merged"
		# edge coverage only (-use_counters=0): a small corpus, fit for CI
		"$exe" -merge=1 -use_counters=0 "$merged" "$seeds" "$work" >"$build/fuzz-merge-$t.log" 2>&1
		new=0
		for f in "$merged"/*; do
			[ -f "$f" ] || continue
			b=$(basename "$f")
			if ! cmp -s "$f" "$seeds/$b" 2>/dev/null && \
			   ! find "$seeds" -type f -exec cmp -s "$f" {} \; -print | grep -q .; then
				cp "$f" "$seeds/$b"
				new=$((new + 1))
			fi
		done
		echo "   corpus: $new new input(s) added to tests/fuzz/corpus/$t" | tee -a "$summary"
	fi
done
echo "summary in $summary"
exit $status
