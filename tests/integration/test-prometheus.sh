#!/bin/bash
# SPDX-License-Identifier: MIT
# The Prometheus endpoint ([global] prometheus = HOST:PORT) of a real tierd:
# GET /metrics passes `promtool check metrics` (the exposition format and
# Prometheus' naming conventions) and Prometheus' own Python text parser;
# counters carry image labels and move for the image the client used only;
# latency histograms agree with the request counters; enums are state
# labels; other methods get 405, other paths 404, a bad request line 400;
# garbage costs nothing; the daemon still serves and stops with 0.
. "$(dirname "$0")/lib.sh"

PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
write_config
sed -i "s|^\[global\]$|[global]\nprometheus = 127.0.0.1:$PORT|" "$CONF"
start_tierd

command -v promtool >/dev/null || fail "promtool missing (prometheus, deploy/install-deps.sh)"
/usr/bin/python3 -c 'import prometheus_client' 2>/dev/null ||
	fail "python3-prometheus-client missing (deploy/install-deps.sh)"

scrape() {
	/usr/bin/python3 - "$PORT" <<'PY'
import sys, urllib.request
r = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=10)
assert r.status == 200, r.status
assert r.headers["Content-Type"] == "text/plain; version=0.0.4", r.headers["Content-Type"]
sys.stdout.write(r.read().decode())
PY
}
# promtool: format and lint (HELP, TYPE, _total, base units, ...); no complaint at all
lint() {
	out=$(promtool check metrics <<<"$1" 2>&1) && [ -z "$out" ] || fail "promtool check metrics: $out"
}
# sample NAME LABELS: the value of the one sample with exactly these labels (Prometheus' parser)
sample() {
	/usr/bin/python3 -c '
import sys
from prometheus_client.parser import text_string_to_metric_families
want = dict(kv.split("=", 1) for kv in sys.argv[2].split(",")) if sys.argv[2] else {}
hits = [s.value for f in text_string_to_metric_families(sys.stdin.read())
        for s in f.samples if s.name == sys.argv[1] and s.labels == want]
assert len(hits) == 1, (sys.argv[1], want, hits)
print(int(hits[0]) if hits[0] == int(hits[0]) else hits[0])' "$1" "$2"
}

before=$(scrape)
lint "$before"
w0=$(sample tierd_requests_total image=disk,op=write <<<"$before")
[ -n "$w0" ] || fail "tierd_requests_total{image=disk,op=write} missing"

qemu-io -f raw -c 'write -P 0x5a 0 64k' -c 'write -P 0x5b 1M 4k' "$(uri)" >/dev/null ||
	fail "qemu-io write"
qemu-io -r -f raw -c 'read 0 4k' "$(uri ro)" >/dev/null || fail "qemu-io read of ro"
after=$(scrape)
lint "$after"
w1=$(sample tierd_requests_total image=disk,op=write <<<"$after")
b1=$(sample tierd_request_bytes_total image=disk,op=write <<<"$after")
[ "$w1" -ge $((w0 + 2)) ] || fail "requests_total{disk,write} did not move: $w0 -> $w1"
[ "$b1" -ge 69632 ] || fail "request_bytes_total{disk,write} $b1 < 69632"
# per image: the writes were to disk only, the read to ro only
[ "$(sample tierd_requests_total image=ro,op=write <<<"$after")" = 0 ] || fail "ro counted writes"
[ "$(sample tierd_requests_total image=ro,op=read <<<"$after")" -ge 1 ] || fail "ro read not counted"
# the histogram counts every completed request: _count and +Inf equal the requests
c=$(sample tierd_request_duration_seconds_count image=disk,op=write <<<"$after")
inf=$(sample tierd_request_duration_seconds_bucket image=disk,op=write,le=+Inf <<<"$after")
[ "$c" = "$w1" ] && [ "$inf" = "$w1" ] || fail "write histogram count $c, +Inf $inf, requests $w1"
# misses are not errors: a missed read counts as a lookup miss, no error
[ "$(sample tierd_request_errors_total image=ro <<<"$after")" = 0 ] || fail "ro read counted as error"
sample tierd_build_info "version=$("$TIERD" --version | awk '{print $2}')" <<<"$after" >/dev/null ||
	fail "tierd_build_info{version} does not match tierd --version"
# enums as labels: exactly one state is 1
/usr/bin/python3 -c '
import sys
from prometheus_client.parser import text_string_to_metric_families
fams = {f.name: f for f in text_string_to_metric_families(sys.stdin.read())}
for name in ("tierd_agent_flush_mode", "tierd_agent_evict_mode"):
    vals = [s.value for s in fams[name].samples]
    assert sorted(vals) == [0, 0, 1], (name, vals)
assert fams["tierd_request_duration_seconds"].type == "histogram"
assert fams["tierd_requests"].type == "counter"
# fills: the help names read fills and the throttled case, every result is a label
doc = fams["tierd_fills"].documentation
assert "read fill" in doc and "skipped_throttled" in doc, doc
res = {s.labels["result"] for s in fams["tierd_fills"].samples if s.labels.get("image") == "disk"}
assert res == {"ok", "failed", "skipped_cold", "skipped_full", "skipped_degraded",
               "skipped_throttled", "skipped_busy", "skipped_unsynced", "skipped_partial"}, res
assert 0 <= [s.value for s in fams["tierd_full_ratio"].samples][0] <= 1
pools = {s.labels["pool"] for s in fams["tierd_pool_ops"].samples}
assert pools == {"base", "cache"}, pools
st = {(s.labels["image"], s.labels["state"]): s.value for s in fams["tierd_image_state"].samples}
assert st[("disk", "ready")] == 1 and st[("disk", "loading")] == 0, st
' <<<"$after" || fail "families, enums, pools"

# GET /metrics only
/usr/bin/python3 - "$PORT" <<'PY' || fail "methods and paths"
import socket, sys
def ask(req):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
    s.sendall(req)
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    return data.decode("latin-1")
for req, want in ((b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "405"),
                  (b"HEAD /metrics HTTP/1.0\r\n\r\n", "405"),
                  (b"GET / HTTP/1.0\r\n\r\n", "404"),
                  (b"GET /metricsx HTTP/1.0\r\n\r\n", "404"),
                  (b"hello\r\n\r\n", "400"),
                  (b"GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n", "200")):
    a = ask(req)
    assert a.split(" ", 2)[1] == want, (req, a[:80])
    if want == "405":
        assert "\r\nAllow: GET\r\n" in a, a
PY

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
