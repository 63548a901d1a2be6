#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench-ceph-slow.sh - tools/bench/bench-ceph.sh on a single-node Ceph whose base
# OSD is HDD-like (issue "A tier that pays for itself", item 4).  osd.0 (pool
# `base`) has its bluestore block on a file that nbdfuse serves from
#   nbdkit --filter=delay file IMG rdelay=DELAY wdelay=DELAY
# (every read and write of the device waits DELAY); osd.1 (pool `cache`) has
# its bluestore block on a plain sparse file; every client has rbd_cache =
# false.  Then, all on that cluster:
#   baseline  fio 4 KiB randwrite at QD 1 on an image in pool base and on one
#             in pool cache (the two device speeds, as the OSDs see them)
#   VARIANTS  bench-ceph.sh's variants (default: a = fio rbd, no tier;
#             b = Ceph's native writeback tier; f = tierd's defaults, extent
#             admission; g = tierd with tier_preset = ceph)
# and prints a Markdown table (IOPS, p99 and max latency, bytes each pool
# moved per client byte) with the issue's goals (f against b: >= 3x IOPS,
# <= 1/10 max latency, <= 1/5 base-pool bytes) to stdout and OUT/summary.md.
# Everything (image, nbdkit socket, FUSE mount, cluster) lives in a fresh temp
# dir that is removed at exit; the daemons are stopped and the mount undone.
# Needs root (FUSE mount), nbdkit, nbdfuse (libnbd-bin), fio, ceph.
#
# Usage: tools/bench/bench-ceph-slow.sh [BUILD_DIR]     (default: build; release is fair)
# Environment (defaults): RUNTIME=60 (s per bench run), QDS=16, SIZE=1G (image),
#   TARGET=256M (target_max_bytes), VARIANTS="a b f g", HIT_SET_PERIOD=10,
#   DELAY=5ms (nbdkit delay filter, reads and writes), BASE_BYTES=8G (slow
#   device), CACHE_BYTES=8G (cache bluestore file), BASELINE_RUNTIME=30 (s per
#   QD 1 baseline, 0 = skip), BASELINE_SIZE=256M, VMEM=8G (ulimit -v per
#   process), OUT=(a new /tmp/tierd-bench-slow.XXXXXX, kept).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-build}" && pwd)
export RUNTIME=${RUNTIME:-60}
export QDS=${QDS:-16}
export SIZE=${SIZE:-1G}
export TARGET=${TARGET:-256M}
export VARIANTS=${VARIANTS:-a b f g}
export HIT_SET_PERIOD=${HIT_SET_PERIOD:-10}
DELAY=${DELAY:-5ms}
BASE_BYTES=${BASE_BYTES:-8G}
CACHE_BYTES=${CACHE_BYTES:-8G}
BASELINE_RUNTIME=${BASELINE_RUNTIME:-30}
BASELINE_SIZE=${BASELINE_SIZE:-256M}
VMEM=${VMEM:-8G}
OUT=${OUT:-$(mktemp -d /tmp/tierd-bench-slow.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

log() { echo "[$(date +%T)] bench-ceph-slow: $*" >&2; }
die() { log "$*"; exit 1; }
R() { local t=$1; shift; timeout -s KILL "$t" "$@"; }

[ "$(id -u)" = 0 ] || die "needs root (FUSE mount of the slow device)"
for b in nbdkit nbdfuse fio ceph rbd rados nbdinfo; do
	command -v "$b" >/dev/null || die "$b not found (Debian: nbdkit, libnbd-bin, fio, ceph)"
done
[ -c /dev/fuse ] || die "no /dev/fuse"
nbdkit --dump-plugin file >/dev/null 2>&1 || die "nbdkit file plugin missing"
nbdkit --filter=delay null --dump-plugin >/dev/null 2>&1 || die "nbdkit delay filter missing"

vmem_kib=$(( $(numfmt --from=iec "$VMEM") / 1024 ))
W=$(mktemp -d /tmp/tierd-slow.XXXXXX)
CL=$W/cluster
MNT=$W/mnt
NKPID= NFPID= CLUSTER=
t_start=$(date +%s)

cleanup() {
	set +e
	if [ -n "$CLUSTER" ]; then
		log "stopping the cluster"
		"$root/deploy/ceph-dev-cluster" stop "$CL" >/dev/null 2>&1
	fi
	if mountpoint -q "$MNT" 2>/dev/null; then
		if command -v fusermount3 >/dev/null; then fusermount3 -u "$MNT"; else umount "$MNT"; fi
		mountpoint -q "$MNT" && umount -l "$MNT"
	fi
	for p in $NFPID $NKPID; do
		kill -TERM "$p" 2>/dev/null
		for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null
	done
	rm -rf "$W"
	log "wall time $(( $(date +%s) - t_start )) s; results in $OUT"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the slow device: nbdkit file + delay filter on a unix socket, as a file via FUSE
truncate -s "$BASE_BYTES" "$W/base.img"
mkdir -p "$MNT"
log "nbdkit --filter=delay file (rdelay=$DELAY wdelay=$DELAY), nbdfuse on $MNT/base.block"
( ulimit -v 2097152; exec nbdkit -f -U "$W/nbd.sock" --filter=delay file "$W/base.img" \
	rdelay="$DELAY" wdelay="$DELAY" ) >"$OUT/nbdkit.log" 2>&1 </dev/null &
NKPID=$!
for _ in $(seq 1 100); do [ -S "$W/nbd.sock" ] && break; sleep 0.1; done
[ -S "$W/nbd.sock" ] || die "nbdkit did not start: $(tail -3 "$OUT/nbdkit.log")"
( ulimit -v 2097152; exec nbdfuse -P "$W/nbdfuse.pid" "$MNT/base.block" --unix "$W/nbd.sock" ) \
	>"$OUT/nbdfuse.log" 2>&1 </dev/null &
NFPID=$!
for _ in $(seq 1 100); do [ -s "$W/nbdfuse.pid" ] && break; sleep 0.1; done
[ -s "$W/nbdfuse.pid" ] && [ -f "$MNT/base.block" ] ||
	die "nbdfuse did not mount: $(tail -3 "$OUT/nbdfuse.log")"

# every process from here on (Ceph daemons, fio, tierd) gets an address-space cap
ulimit -v "$vmem_kib"

# ---- the cluster: base on the slow file, cache on a plain one, no client rbd cache
log "starting the cluster in $CL (osd.0 bluestore on $MNT/base.block, osd.1 bluestore on a plain file)"
CLUSTER=1
CEPH_DEV_BASE_OSD_BLOCK=$MNT/base.block CEPH_DEV_CACHE_OSD_STORE=bluestore \
	CEPH_DEV_BLUESTORE_BYTES=$CACHE_BYTES CEPH_DEV_CLIENT_CONF='rbd cache = false' \
	"$root/deploy/ceph-dev-cluster" start "$CL"
export CEPH_CONF=$CL/ceph.conf
cp "$CEPH_CONF" "$OUT/ceph.conf"
rbdc=$(ceph-conf -c "$CEPH_CONF" --name client.admin --lookup rbd_cache 2>/dev/null || echo "?")
{
	echo "slow device: nbdkit $(nbdkit --version | awk '{print $2}') --filter=delay file rdelay=$DELAY wdelay=$DELAY, nbdfuse, $BASE_BYTES"
	echo "cache device: plain sparse file, $CACHE_BYTES"
	echo "client rbd_cache: $rbdc"
	echo "loadavg at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/slow.txt"
[ "$rbdc" = false ] || die "rbd_cache for client.admin is '$rbdc', not false"

# ---- device baselines: fio 4 KiB randwrite, QD 1, on a prefilled image in each pool
if [ "$BASELINE_RUNTIME" != 0 ]; then
	for pool in base cache; do
		log "baseline: QD 1 randwrite on pool $pool (${BASELINE_RUNTIME}s)"
		R 60 rbd create --size "$BASELINE_SIZE" --image-feature layering "$pool/devspeed"
		R 600 fio --name=fill --ioengine=rbd --clientname=admin --pool="$pool" --rbdname=devspeed \
			--rw=write --bs=4M --iodepth=4 --size="$BASELINE_SIZE" --output-format=terse >/dev/null
		R $((BASELINE_RUNTIME + 120)) fio --name=dev --ioengine=rbd --clientname=admin --pool="$pool" \
			--rbdname=devspeed --rw=randwrite --bs=4k --iodepth=1 --size="$BASELINE_SIZE" \
			--randseed=1 --time_based --runtime="$BASELINE_RUNTIME" --output-format=json \
			--output="$OUT/baseline-$pool.fio.json" >/dev/null
		R 300 rbd rm --no-progress "$pool/devspeed" >/dev/null 2>&1
	done
	# Ceph's `osd tier add` wants an empty cache pool: drop rbd's pool metadata too
	R 300 rados purge cache --yes-i-really-really-mean-it >>"$OUT/baseline.log" 2>&1 ||
		die "rados purge cache failed: $(tail -3 "$OUT/baseline.log")"
fi

# ---- the benchmark variants, on this cluster
log "bench-ceph.sh VARIANTS=\"$VARIANTS\" QDS=\"$QDS\" RUNTIME=$RUNTIME SIZE=$SIZE TARGET=$TARGET"
CEPH_DIR=$CL OUT=$OUT/bench "$root/tools/bench/bench-ceph.sh" "$build" >/dev/null
echo "loadavg at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/slow.txt"

# ---- summary
python3 - "$OUT" <<'PYEOF' | tee "$OUT/summary.md"
import json, os, sys
out = sys.argv[1]
bench = os.path.join(out, "bench")
def load(p):
    try:
        return json.load(open(p))
    except (OSError, ValueError):
        return None
print(open(os.path.join(out, "slow.txt")).read().strip().replace("\n", "  \n"))
print()
print("| device baseline (fio 4 KiB randwrite, QD 1) | IOPS | mean ms | p99 ms | max ms |")
print("|---|---|---|---|---|")
for pool in ("base", "cache"):
    f = load(os.path.join(out, "baseline-%s.fio.json" % pool))
    if f:
        w = f["jobs"][0]["write"]
        print("| pool %s | %.0f | %.1f | %.1f | %.0f |" % (pool, w["iops"], w["clat_ns"]["mean"] / 1e6,
              w["clat_ns"]["percentile"]["99.000000"] / 1e6, w["clat_ns"]["max"] / 1e6))
print()
names = {"a": "no tier (fio rbd)", "b": "Ceph native writeback tier (fio rbd)",
         "c": "tierd, object (bench-ceph c)", "d": "tierd, extent (bench-ceph d)",
         "e": "tierd, object, no throttle", "f": "tierd defaults (extent admission)",
         "g": "tierd tier_preset = ceph"}
def pools(df):
    return {p["name"]: p for p in df["pools"]} if df else {}
OBJ = 4 << 20   # RBD object size: Ceph's tier promotes and flushes whole objects
print("Bytes per client byte are `rados df` deltas over the run divided by fio's bytes;")
print("for b the base reads add Ceph's promotions (osd.1 tier_promote x 4 MiB: the")
print("OSD's copy-get does not show in `rados df`).  dirty at end: tierd's dirty_bytes,")
print("for b the cache pool's dirty objects x 4 MiB (both flushed to base later).")
print()
print("| variant | QD | write IOPS | p99 ms | max ms | client MiB | base rd/wr per client byte | cache rd/wr per client byte | dirty at end MiB |")
print("|---|---|---|---|---|---|---|---|---|")
res = {}
try:
    runs = open(os.path.join(bench, "runs")).read().split()
except OSError:
    runs = []
for tag in runs:
    v, qd = tag.split("-qd")
    f = load(os.path.join(bench, tag + ".fio.json"))
    if not f:
        continue
    w = f["jobs"][0]["write"]
    cb = w["io_bytes"]
    b, a = pools(load(os.path.join(bench, tag + ".before.df.json"))), pools(load(os.path.join(bench, tag + ".after.df.json")))
    def d(pool, k):
        try:
            return a[pool][k] - b[pool][k]
        except KeyError:
            return None
    r = dict(iops=w["iops"], p99=w["clat_ns"]["percentile"]["99.000000"] / 1e6,
             max=w["clat_ns"]["max"] / 1e6, client=cb,
             **{p + k: d(p, k + "_bytes") for p in ("base", "cache") for k in ("read", "write")})
    r["dirty"] = None
    pa = load(os.path.join(bench, tag + ".perf.after.json"))
    if pa:
        r["dirty"] = pa["tierd"]["dirty_bytes"]
    oa, ob = load(os.path.join(bench, tag + ".after.osd1.json")), load(os.path.join(bench, tag + ".before.osd1.json"))
    if v == "b" and oa and ob and r["baseread"] is not None:
        r["baseread"] += (oa["osd"]["tier_promote"] - ob["osd"]["tier_promote"]) * OBJ
        cd = load(os.path.join(bench, tag + ".cephdf.json"))
        if cd:
            r["dirty"] = [p for p in cd["pools"] if p["name"] == "cache"][0]["stats"]["dirty"] * OBJ
    res[(v, qd)] = r
    def per(x):
        return "?" if x is None or not cb else "%.2f" % (x / cb)
    print("| %s. %s | %s | %.0f | %.1f | %.0f | %.0f | %s%s / %s | %s / %s | %s |" % (
        v, names.get(v, v), qd, r["iops"], r["p99"], r["max"], cb / 2**20,
        "~" if v == "b" else "", per(r["baseread"]), per(r["basewrite"]),
        per(r["cacheread"]), per(r["cachewrite"]),
        "-" if r["dirty"] is None else "%.0f" % (r["dirty"] / 2**20)))
print()
for qd in sorted({q for _, q in res}, key=int):
    f, b = res.get(("f", qd)), res.get(("b", qd))
    if not (f and b):
        continue
    print("Goals at QD %s, tierd defaults (f) against Ceph's native tier (b):" % qd)
    ok = lambda c: "met" if c else "NOT met"
    print("- IOPS: %.0f / %.0f = %.2fx (goal >= 3x: %s)" % (f["iops"], b["iops"], f["iops"] / b["iops"], ok(f["iops"] >= 3 * b["iops"])))
    print("- max latency: %.0f / %.0f ms = %.3f (goal <= 0.1: %s)" % (f["max"], b["max"], f["max"] / b["max"], ok(f["max"] <= 0.1 * b["max"])))
    fb = (f["baseread"] or 0) + (f["basewrite"] or 0)
    bb = (b["baseread"] or 0) + (b["basewrite"] or 0)
    # per client byte: the runs wrote different amounts
    fr, br = fb / f["client"], bb / b["client"]
    print("- base-pool bytes (read + written) per client byte: %.3f / %.3f = %s (goal <= 0.2: %s)" % (
        fr, br, "%.3f" % (fr / br) if br else "inf", ok(br and fr <= 0.2 * br)))
    print("- base-pool bytes absolute: %.0f / %.0f MiB = %s" % (fb / 2**20, bb / 2**20, "%.3f" % (fb / bb) if bb else "inf"))
    fd, bd = fb + (f["dirty"] or 0), bb + (b["dirty"] or 0)
    fr, br = fd / f["client"], bd / b["client"]
    print("- the same with the dirty data left at the end counted as flushed: %.3f / %.3f = %s (goal <= 0.2: %s)" % (
        fr, br, "%.3f" % (fr / br) if br else "inf", ok(br and fr <= 0.2 * br)))
PYEOF
echo >>"$OUT/summary.md"
cat "$OUT/bench/table.md" >>"$OUT/summary.md"
