#!/bin/bash
# SPDX-License-Identifier: MIT
# The Prometheus endpoint ([global] prometheus = HOST:PORT) of a real tierd:
# a scrape returns the text format, counters move after client I/O, a
# garbage request gets no crash, and the daemon still serves and stops with 0.
. "$(dirname "$0")/lib.sh"

PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
write_config
sed -i "s|^\[global\]$|[global]\nprometheus = 127.0.0.1:$PORT|" "$CONF"
start_tierd

scrape() {
	/usr/bin/python3 - "$PORT" <<'PY'
import sys, urllib.request
r = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=10)
assert r.status == 200, r.status
assert r.headers["Content-Type"].startswith("text/plain"), r.headers["Content-Type"]
sys.stdout.write(r.read().decode())
PY
}
metric() { awk -v m="$1" '$1 == m { print $2 }'; }
# grep -q reads from a here-string, not a pipe: it stops at the first match,
# and with pipefail an echo still writing into the pipe would fail the check

before=$(scrape)
grep -q '^# TYPE tierd_write_ops_total counter$' <<<"$before" || fail "no write_ops counter type line"
w0=$(echo "$before" | metric tierd_write_ops_total)
[ -n "$w0" ] || fail "tierd_write_ops_total missing"

qemu-io -f raw -c 'write -P 0x5a 0 64k' -c 'write -P 0x5b 1M 4k' "$(uri)" >/dev/null ||
	fail "qemu-io write"
after=$(scrape)
w1=$(echo "$after" | metric tierd_write_ops_total)
b1=$(echo "$after" | metric tierd_write_bytes_total)
[ "$w1" -ge $((w0 + 2)) ] || fail "write_ops_total did not move: $w0 -> $w1"
[ "$b1" -ge 69632 ] || fail "write_bytes_total $b1 < 69632"
grep -q '^tierd_latency_seconds{op="write",quantile="0.99"} ' <<<"$after" ||
	fail "no write latency quantile"
grep -q '^tierd_cached_bytes ' <<<"$after" || fail "no cached_bytes gauge"

# garbage and a client that sends nothing: the daemon is unaffected
/usr/bin/python3 - "$PORT" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"\x00\xff" * 5000)   # never a complete request head
s.close()
idle = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
PY
scrape >/dev/null || fail "scrape after garbage"
qemu-io -f raw -c 'read -P 0x5a 0 64k' "$(uri)" >/dev/null || fail "data after scrapes"
stop_tierd
log "prometheus endpoint OK"
