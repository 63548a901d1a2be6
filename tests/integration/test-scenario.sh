#!/bin/bash
# SPDX-License-Identifier: MIT
# `tier-bench scenario seed004` end to end (not its speed): a bounded run
# (2 images x 32 MiB, QD 1 and 2 per job, 1 s each, variants base and
# defaults on the hdd profile) must finish well under a minute with exit 0,
# a JSON holding both variants x both QDs with IOPS > 0, no I/O errors, both
# jobs served, tierd's counter deltas equal to what the client sent, the goal
# ratios, a CSV with every run and a well-formed SVG; every temp dir it made
# must be gone.  Then the failures, each reported as FAILED (exit 1, the
# variant ok = false with a reason, no IOPS number for it): tierd refusing a
# base profile (its own error is quoted), a server whose writes fail with EIO
# (nbdkit's error filter behind a fake tierd), and tierd SIGKILLed mid-run.
. "$(dirname "$0")/lib.sh"

: "${TIER_BENCH:?set TIER_BENCH to the tier-bench binary}"
command -v jq >/dev/null || { echo "SKIP: jq not installed"; exit 77; }

SC=("$TIER_BENCH" scenario seed004 --images 2 --image-size 32M)
# the default --tierd is ../daemon/tierd next to tier-bench (the build tree)
DEF_TIERD=$(dirname "$TIER_BENCH")/../daemon/tierd
if [ -x "$DEF_TIERD" ] && [ "$(realpath "$DEF_TIERD")" = "$(realpath "$TIERD")" ]; then
	TIERD_OPT=()
else
	TIERD_OPT=(--tierd "$TIERD")
fi

# dirs_gone FILE: every /tmp/tier-scenario.* dir named in FILE no longer exists
dirs_gone() {
	local d
	for d in $(grep -o '/tmp/tier-scenario\.[A-Za-z0-9]*' "$1" | sort -u); do
		[ ! -e "$d" ] || fail "temp dir $d left behind"
	done
}

log "scenario seed004: base,defaults on hdd, QD 1,2, 1 s each"
start=$(date +%s)
rc=0
timeout 120 "${SC[@]}" "${TIERD_OPT[@]}" --qd 1,2 --runtime 1 --ramp 0 --variants base,defaults \
	--base-profile hdd --json "$WORK/s.json" --csv "$WORK/s.csv" --svg "$WORK/s.svg" \
	> "$WORK/s.txt" 2> "$WORK/s.err" || rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$WORK/s.txt" "$WORK/s.err"
[ "$rc" = 0 ] || fail "scenario exited with status $rc"
[ "$elapsed" -lt 60 ] || fail "bounded scenario took ${elapsed}s (limit 60)"
J=$WORK/s.json
jq -e . "$J" >/dev/null || fail "JSON does not parse"
[ "$(jq -c '[.variants[] | [.variant, .base_profile]]' "$J")" = '[["base","hdd"],["defaults","hdd"]]' ] ||
	fail "JSON variants are not base/hdd and defaults/hdd"
jq -e 'all(.variants[]; .ok == true and .started == true and .error == null)' "$J" >/dev/null ||
	fail "a variant is not ok"
for v in base defaults; do
	[ "$(jq -c --arg v "$v" '[.variants[] | select(.variant == $v) | .runs[].qd]' "$J")" = "[1,2]" ] ||
		fail "variant $v did not produce runs at QD 1 and 2"
done
jq -e 'all(.variants[].runs[]; .client_cpu_s > 0 and .tierd_cpu_s > 0 and .run_wall_s >= .seconds)' \
	"$J" >/dev/null || fail "no CPU accounting for tier-bench or tierd"
jq -e 'all(.variants[].runs[]; .ok == true and .iops > 0 and .ops > 0 and .io_errors == 0
	and .error == null and .outstanding == .qd * 2 and .jobs == 2 and .job_iops_min > 0
	and .lat_mean_ms > 0 and .lat_mean_ms <= .lat_max_ms and .lat_p99_ms <= .lat_max_ms)' \
	"$J" >/dev/null || fail "a run with no IOPS, I/O errors, an idle job or odd latencies"
# tierd counted what the two jobs sent (the admin socket was read around each run)
jq -e 'all(.variants[].runs[]; .tierd_delta.write_ops == .write_ops
	and .tierd_delta.write_bytes == .write_ops * 4096 and .read_ops == 0)' "$J" >/dev/null ||
	fail "tierd's counter deltas differ from the client's"
jq -e '[.variants[] | select(.variant == "base") | .runs[].base_io_b_per_client_b] | all(. >= 0.99)' \
	"$J" >/dev/null || fail "cache_mode = none did not send every client byte to the base pool"
[ "$(jq -c '[.ratios[] | select(.name == "defaults/base") | .qd]' "$J")" = "[1,2]" ] ||
	fail "no defaults/base ratio per QD"
jq -e 'all(.ratios[] | select(.name == "defaults/base"); (.value | type) == "number" and .value > 0
	and (.met | type) == "boolean" and .goal == 5)' "$J" >/dev/null || fail "defaults/base ratios"
jq -e 'all(.ratios[] | select(.name != "defaults/base"); .value == null and .met == null)' "$J" \
	>/dev/null || fail "a ratio against a variant that did not run has a value"
[ "$(jq '.seed_published | length' "$J")" = 2 ] || fail "seed's published numbers missing"
[ "$(grep -c '^run,' "$WORK/s.csv")" = 4 ] || fail "CSV should have 4 run rows"
# every row has the header's fields (no commas inside the quoted error fields here)
awk -F, 'NR == 1 { n = NF } NF != n { bad = 1 } END { exit bad }' "$WORK/s.csv" ||
	fail "CSV rows with a different number of fields than the header"
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "iops") c = i; next }
	$1 == "run" && ($6 != 1 || $c <= 0) { bad = 1 } END { exit bad || !c }' "$WORK/s.csv" ||
	fail "CSV run rows not ok or without IOPS"
grep -q '^== seed004 defaults, base_profile hdd' "$WORK/s.txt" || fail "no defaults table"
grep -q '^defaults / base ' "$WORK/s.txt" || fail "no ratio row"
grep -q 'FAILED' "$WORK/s.txt" && fail "a FAILED in a good run"
head -c 200 "$WORK/s.svg" | grep -q '^<svg xmlns="http://www.w3.org/2000/svg"' || fail "SVG header"
[ "$(grep -c '<polyline' "$WORK/s.svg")" = 4 ] || fail "SVG: 2 variants + 2 seed lines expected"
if command -v xmllint >/dev/null; then
	xmllint --noout "$WORK/s.svg" || fail "SVG is not well-formed"
fi
dirs_gone "$WORK/s.err"

log "a base profile tierd refuses: FAILED with tierd's error, the other variant still runs"
rc=0
"${SC[@]}" --tierd "$TIERD" --qd 1 --runtime 0.5 --ramp 0.3 --variants base \
	--base-profile no-such-disk,hdd \
	--json "$WORK/p.json" > "$WORK/p.txt" 2> "$WORK/p.err" || rc=$?
cat "$WORK/p.txt"
[ "$rc" = 1 ] || fail "scenario exited $rc with a refused profile (want 1)"
jq -e '.variants[0].base_profile == "no-such-disk" and .variants[0].started == false
	and .variants[0].ok == false and .variants[0].runs == []
	and (.variants[0].error | test("no-such-disk"))' "$WORK/p.json" >/dev/null ||
	{ jq . "$WORK/p.json"; fail "refused profile not reported with tierd's error"; }
jq -e '.variants[1].base_profile == "hdd" and .variants[1].ok and .variants[1].runs[0].iops > 0' \
	"$WORK/p.json" >/dev/null || fail "the variant after a failed one did not run"
# a ramp delays the counted part, it does not cut it short
jq -e '.variants[1].runs[0].seconds >= 0.45 and .variants[1].runs[0].ops >= 20' "$WORK/p.json" \
	>/dev/null || fail "the run after --ramp was cut short"
grep -q 'FAILED: tierd exited with status' "$WORK/p.txt" || fail "table does not say FAILED"
dirs_gone "$WORK/p.err"

if command -v nbdkit >/dev/null && command -v python3 >/dev/null &&
	nbdkit --filter=error null --dump-plugin >/dev/null 2>&1; then
	log "writes failing with EIO (nbdkit error filter behind a fake tierd): FAILED, not a number"
	cat > "$WORK/fake-tierd" <<'SH'
#!/bin/bash
# fake tierd for tier-bench scenario: nbdkit memory whose writes fail 30% of
# the time on the NBD socket, and a `perf dump` responder on the admin socket
conf=$2
sock=$(sed -n 's/^listen = unix://p' "$conf")
asok=$(sed -n 's/^admin_socket = //p' "$conf")
python3 - "$asok" <<'PY' &
import json, os, socket, sys
names = ("read_ops write_ops read_bytes write_bytes errors read_hits read_misses write_hits "
         "write_misses proxy_reads proxy_writes proxy_write_bytes promotions promote_bytes "
         "promote_throttled fills fill_bytes flushes flush_bytes evictions evict_bytes").split()
ans = json.dumps({"tierd": dict({n: 0 for n in names},
                                cached_bytes=0, dirty_bytes=0)}) + "\n"
parent = os.getppid()
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
s.settimeout(0.2)
while os.getppid() == parent:
    try:
        c, _ = s.accept()
    except socket.timeout:
        continue
    c.recv(256)
    c.sendall(ans.encode())
    c.close()
PY
while [ ! -S "$asok" ]; do sleep 0.05; done
exec nbdkit -f -U "$sock" --filter=error memory 32M error=EIO error-pwrite-rate=30%
SH
	chmod +x "$WORK/fake-tierd"
	rc=0
	"${SC[@]}" --tierd "$WORK/fake-tierd" --qd 1,2 --runtime 0.5 --ramp 0 --variants defaults \
		--base-profile hdd --json "$WORK/e.json" > "$WORK/e.txt" 2> "$WORK/e.err" || rc=$?
	cat "$WORK/e.txt"
	[ "$rc" = 1 ] || { cat "$WORK/e.err"; fail "scenario exited $rc with I/O errors (want 1)"; }
	jq -e '.variants[0].ok == false and (.variants[0].error | test("I/O errors"))
		and (.variants[0].runs | length) == 2
		and all(.variants[0].runs[]; .ok == false and .iops == null and (.error | test("I/O errors")))' \
		"$WORK/e.json" >/dev/null || { jq . "$WORK/e.json"; fail "I/O errors not reported as failed runs"; }
	[ "$(grep -c '^IOPS .*FAILED .*FAILED' "$WORK/e.txt")" = 1 ] || fail "table shows IOPS numbers for failed runs"
	jq -e 'all(.ratios[]; .value == null)' "$WORK/e.json" >/dev/null || fail "a ratio from failed runs"
	dirs_gone "$WORK/e.err"
fi

log "tierd SIGKILLed during the load: FAILED"
# The kill comes 1 s after tierd's NBD socket appears (its start-up under
# ASan on a loaded machine can take longer than a fixed delay).
cat > "$WORK/kill-tierd" <<SH
#!/bin/bash
conf=; prev=
for a in "\$@"; do [ "\$prev" != --config ] || conf=\$a; prev=\$a; done
( sock=\$(dirname "\$conf")/nbd.sock
  for _ in \$(seq 1200); do [ -S "\$sock" ] && break; sleep 0.05; done
  sleep 1; kill -KILL \$\$ ) &
exec "$TIERD" "\$@"
SH
chmod +x "$WORK/kill-tierd"
rc=0
timeout 120 "${SC[@]}" --tierd "$WORK/kill-tierd" --qd 1,2 --runtime 2 --ramp 0 --variants base \
	--base-profile hdd --json "$WORK/k.json" > "$WORK/k.txt" 2> "$WORK/k.err" || rc=$?
cat "$WORK/k.txt"
[ "$rc" = 1 ] || { cat "$WORK/k.err"; fail "scenario exited $rc after tierd was killed (want 1)"; }
jq -e '.variants[0].ok == false and (.variants[0].error | length) > 0
	and (.variants[0].runs | length) == 2 and .variants[0].runs[1].ok == false
	and .variants[0].runs[1].iops == null' "$WORK/k.json" >/dev/null ||
	{ jq . "$WORK/k.json"; fail "a killed tierd not reported as failed"; }
dirs_gone "$WORK/k.err"
log "PASS"
