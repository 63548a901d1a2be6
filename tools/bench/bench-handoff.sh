#!/bin/bash
# SPDX-License-Identifier: MIT
# Handoff with many cached objects (docs/BENCHMARKS.md "Failover"): two
# tierds (release build) name one RBD image on a Ceph cluster; tierd a
# writes one 4 KiB block into each of N objects (N dirty cached objects),
# then a client of tierd b writes one block: b asks a for the image, a
# hands over, b rebuilds its map from the cache pool and answers.  Printed:
# the seconds from b's client connecting to its first write answered, for
# BENCH_ROUNDS handoffs each way (b, then a back), then each full map load
# that ended (the scan goes on behind the first answers: a handoff parks a
# load still running, so only the last owner's may appear).
#
# Usage: CEPH_CONF=... tools/bench/bench-handoff.sh [N]     (default 20000)
# A cluster: deploy/ceph-dev-cluster start DIR; eval "$(deploy/ceph-dev-cluster env DIR)".
# Environment: BUILD_DIR [./build-bench, a release build made if missing],
# BENCH_ROUNDS [3], POOL [base], CACHE_POOL [cache] (in a namespace of the
# run's own, removed after).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
N=${1:-20000}
ROUNDS=${BENCH_ROUNDS:-3}
POOL=${POOL:-base}
CACHE_POOL=${CACHE_POOL:-cache}
: "${CEPH_CONF:?set CEPH_CONF (deploy/ceph-dev-cluster env DIR)}"
build=${BUILD_DIR:-$root/build-bench}
if [ ! -d "$build" ]; then
	meson setup "$build" --buildtype=release -Drados=enabled >/dev/null
fi
ninja -C "$build" >/dev/null
W=$(mktemp -d /tmp/tierd-handoff.XXXXXX)
IMG=handoff$$
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do timeout 60 tail --pid="$p" -f /dev/null 2>/dev/null || true; done
	# the cache namespace is this run's own
	rados -p "$CACHE_POOL" -N "$IMG" ls 2>/dev/null |
		xargs -r -n 1000 rados -p "$CACHE_POOL" -N "$IMG" rm 2>/dev/null || true
	rbd rm --no-progress "$POOL/$IMG" >/dev/null 2>&1 || true
	rm -rf "$W"
}
trap cleanup EXIT

rbd create --size "$((N * 4))M" --image-feature layering "$POOL/$IMG"
for n in a b; do
	cat >"$W/$n.conf" <<CFG
[global]
backend = rados
listen = unix:$W/$n.sock
admin_socket = $W/$n.asok
[rados]
conf = $CEPH_CONF
client_name = client.admin
base_pool = $POOL
cache_pool = $CACHE_POOL
cache_namespace = $IMG
[tier]
target_max_bytes = $((N * 8 / 1024 + 64))M
[image.disk]
rbd_image = $IMG
CFG
	"$build/daemon/tierd" --config "$W/$n.conf" 2>"$W/$n.log" &
	pids+=($!)
	for _ in $(seq 1 300); do [ -S "$W/$n.sock" ] && break; sleep 0.1; done
done
/usr/bin/python3 - "$W" "$N" "$ROUNDS" <<'EOF'
import nbd, sys, time
W, n, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def conn(name):
    h = nbd.NBD()
    h.connect_uri("nbd+unix:///disk?socket=%s/%s.sock" % (W, name))
    return h
h = conn("a")
buf = nbd.Buffer.from_bytearray(bytearray(b"z" * 4096))
t = time.time()
for i in range(n):
    while h.aio_in_flight() >= 64:
        h.poll(1000)
    h.aio_pwrite(buf, i * (4 << 20), completion=lambda e: 1)
while h.aio_in_flight() > 0:
    h.poll(1000)
h.flush(); h.shutdown()
print("objects %d written through tierd a in %.1f s" % (n, time.time() - t))
for r in range(rounds):
    for name in ("b", "a"):
        t = time.time()
        c = conn(name)
        c.pwrite(b"q" * 4096, 4096)
        print("handoff to %s: first write answered after %.2f s" % (name, time.time() - t))
        c.shutdown()
EOF
# the last owner (a) answered at once; its full map load goes on behind
loaded='image disk: [1-9][0-9]* cached objects .*map loaded in'
for _ in $(seq 1 600); do grep -q "$loaded" "$W/a.log" && break; sleep 0.5; done
for n in a b; do
	grep -h "$loaded" "$W/$n.log" | sed "s/^/tierd $n: /"
done
