#!/bin/bash
# SPDX-License-Identifier: MIT
# Logs worth reading (issue 13 item 3): connection lines with the peer and
# the export; audit lines with the admin peer's uid for reload, config set,
# flush, evict and promote; a pool error (a base object that is a directory:
# EISDIR from the local backend) gives error lines naming op, object, image,
# pool and the errno, at most TIER_LOG_BURST (10) per op per 10 s and then a
# line with the number suppressed; a failing flush is logged the same way;
# under systemd (JOURNAL_STREAM names stderr) the same records reach the
# journal's native socket with IMAGE=, POOL=, OBJECT=, OP=, ERRNO= fields
# (checked in a mount namespace with a stand-in socket where unshare works).
. "$(dirname "$0")/lib.sh"
: "${TIERCTL:?set TIERCTL to the tierctl binary}"
OBJ=$((4 << 20))
ctl() { "$TIERCTL" --socket="$ASOK" "$@"; }

write_config
start_tierd
uid=$(id -u)

log "connection lines: peer (pid, uid) and export, open and close"
nbdinfo --size "$(uri)" > /dev/null
grep -Eq "nbd: connection [0-9]+ from unix pid [0-9]+ uid $uid: export 'disk', structured replies" "$LOG" ||
	fail "no connection line with peer and export"
grep -Eq "nbd: connection [0-9]+ from unix pid [0-9]+ uid $uid closed \(export 'disk'\)" "$LOG" ||
	fail "no connection-closed line"

log "audit lines: uid and pid of the admin peer, ok or failed"
ctl flush > /dev/null
ctl evict > /dev/null
ctl promote disk 0 4096 > /dev/null
ctl config set cache_min_flush_age 5 > /dev/null || true
ctl config set no_such_key 1 > /dev/null 2>&1 || true
ctl reload > /dev/null
ctl status > /dev/null
for c in "'flush' -> ok" "'evict' -> ok" "'promote disk 0 4096' -> ok" \
	 "'config set cache_min_flush_age 5' -> " "'config set no_such_key 1' -> failed: " \
	 "'reload' -> ok"; do
	grep -Fq "audit: uid $uid pid " "$LOG" || fail "no audit line"
	grep "audit: uid $uid pid [0-9]*: " "$LOG" | grep -Fq "$c" || fail "no audit line for $c"
done
grep -q "audit: .*'status'" "$LOG" && fail "read-only command audited"

log "a base pool error: error lines with op, object, image, pool and errno name"
bad=rbd_data.disk.0000000000000007
mkdir "$WORK/data/base/$bad"
n=40
args=()
for i in $(seq 1 $n); do args+=(-c "read $((7 * OBJ + i * 4096)) 4096"); done
qemu-io -f raw "${args[@]}" "$(uri)" > "$WORK/q.out" 2>&1 || true
nfail=$(grep -c 'read failed' "$WORK/q.out" || true)
[ "$nfail" -eq $n ] || { cat "$WORK/q.out"; fail "expected $n failed reads, got $nfail"; }
pat="error: read of $bad failed: EISDIR (Is a directory) [image disk, pool base]; returned to the client"
lines=$(grep -cF "$pat" "$LOG" || true)
log "$lines read error lines for $n failed reads"
[ "$lines" -ge 1 ] || fail "no error line for the failed reads"
[ "$lines" -le 10 ] || fail "$lines error lines: not rate-limited (at most 10 per 10 s)"
log "after the window: one line with the number suppressed"
for i in $(seq 1 150); do
	grep -Eq "warn: [0-9]+ more read failure line\(s\) suppressed in the last 10 s" "$LOG" && break
	sleep 0.1
done
sup=$(grep -Eo "[0-9]+ more read failure line\(s\) suppressed" "$LOG" | head -1 | cut -d' ' -f1)
[ -n "$sup" ] || fail "no suppressed-lines summary"
[ $((sup + lines)) -eq $n ] || fail "lines $lines + suppressed $sup != $n failures"

log "a failing flush is logged with the object, pool and errno"
bad2=rbd_data.disk.0000000000000009
mkdir "$WORK/data/base/$bad2"
qemu-io -f raw -c "write -P 0x5a $((9 * OBJ)) 64k" "$(uri)" > "$WORK/w.out" 2>&1 || true
ctl flush > /dev/null
for i in $(seq 1 100); do
	grep -Eq "(flush|write) of $bad2 failed: EISDIR \(Is a directory\) \[image disk, pool base\]" "$LOG" && break
	sleep 0.1
done
grep -Eq "(flush|write) of $bad2 failed: EISDIR \(Is a directory\) \[image disk, pool base\]" "$LOG" ||
	fail "no line for the failing flush (or proxied write) of $bad2"
rmdir "$WORK/data/base/$bad" "$WORK/data/base/$bad2"
ctl flush > /dev/null
stop_tierd

log "under systemd: journald entries with fields"
if ! unshare -m true 2>/dev/null; then
	log "SKIP (journald part only): unshare -m is not permitted here"
	log "PASS (without the journald part)"
	exit 0
fi
mkdir -p "$WORK/journal"
/usr/bin/python3 "$(dirname "$0")/journal_sink.py" "$WORK/journal/socket" "$WORK/journal.jsonl" &
sink=$!
for i in $(seq 1 50); do [ -S "$WORK/journal/socket" ] && break; sleep 0.1; done
mkdir "$WORK/data/base/$bad"
: > "$WORK/stderr"
js=$(stat -c '%d:%i' "$WORK/stderr")
# only inside the namespace: the stand-in socket dir over journald's (or, on
# a machine without one, a private /run holding it)
unshare -m bash -c "set -e
	if [ ! -d /run/systemd/journal ]; then
		mount -t tmpfs tmpfs /run
		mkdir -p /run/systemd/journal
	fi
	mount --bind '$WORK/journal' /run/systemd/journal
	JOURNAL_STREAM=$js exec '$TIERD' --config '$CONF'" 2>>"$WORK/stderr" &
TIERD_PID=$!
for i in $(seq 1 200); do nbdinfo --size "$(uri)" >/dev/null 2>&1 && break; sleep 0.1; done
qemu-io -f raw -c "read $((7 * OBJ)) 4096" "$(uri)" > /dev/null 2>&1 || true
for i in $(seq 1 50); do grep -q '"OBJECT"' "$WORK/journal.jsonl" 2>/dev/null && break; sleep 0.1; done
kill -TERM "$TIERD_PID"; wait "$TIERD_PID" || fail "tierd (journald run) exit status"
TIERD_PID=
kill "$sink"; wait "$sink" 2>/dev/null || true
/usr/bin/python3 - "$WORK/journal.jsonl" "$bad" <<'PY' || { cat "$WORK/journal.jsonl" "$WORK/stderr" >&2; fail "journald fields"; }
import json, sys
es = [json.loads(l) for l in open(sys.argv[1])]
hit = [e for e in es if e.get("OBJECT") == sys.argv[2] and e.get("OP") == "read"]
assert hit, "no journal entry for the failed read"
e = hit[0]
assert e["IMAGE"] == "disk" and e["POOL"] == "base", e
assert e["ERRNO"] == "21" and e["ERRNO_NAME"] == "EISDIR", e
assert e["PRIORITY"] == "3" and e["SYSLOG_IDENTIFIER"] == "tierd", e
assert "read of %s failed: EISDIR" % sys.argv[2] in e["MESSAGE"], e
print("journal entry:", json.dumps(e))
PY
grep -q "read of $bad failed" "$WORK/stderr" && fail "the structured record also went to stderr"
log "PASS"
