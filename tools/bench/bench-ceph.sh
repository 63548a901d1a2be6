#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench-ceph.sh - one fio job, three ways, on one fresh single-node Ceph
# (deploy/ceph-dev-cluster, memstore): 4 KiB randwrite, random_distribution=
# zipf:1.1, at each queue depth of QDS, on one RBD image in pool `base`:
#   a  fio ioengine=rbd on the base pool, no tier
#   b  fio ioengine=rbd with Ceph's native writeback cache tier (pool `cache`
#      as overlay of `base`), then the tier is flushed and removed
#   c  fio ioengine=nbd through tierd (backend = rados) on the same pools,
#      promote_granularity = object (whole objects, as Ceph)
#   d  as c with promote_granularity = extent (beyond Ceph)
#   e  as c with both promotion throttles off (tierd's default before ece7af3)
#   f  tierd with its defaults: [tier] sets only target_max_bytes (extent
#      admission, writes on first touch)
#   g  tierd with tier_preset = ceph (Ceph's cache tiering in tierd), the
#      target and the hit_set_period of b
# Each tierd variant starts on a purged cache pool.  With the same tier
# settings for b, c, d and e: target, ratios, hitsets,
# recency, and for c and d the promotion throttle of Ceph's OSDs
# (osd_tier_promote_max_bytes_sec / _objects_sec, read from the cluster).  Each run starts with an empty
# cache.  Per run it records fio's JSON, `rados df -f json` before and after
# (after `ceph tell osd.N flush_pg_stats`), and tierd's `perf dump`; it prints
# a Markdown table (IOPS, p99 and max completion latency, bytes read from and
# written to each pool during the run) to stdout and OUT/table.md.
#
# Usage: tools/bench/bench-ceph.sh [BUILD_DIR]      (default: build; a release build
#        is the fair one: meson setup build-rel --buildtype=release)
# Environment (defaults): RUNTIME=40 (s per run), QDS="16 1", SIZE=2G (image),
#   TARGET=512M (target_max_bytes), HIT_SET_PERIOD=10, VARIANTS="a b c d e",
#   OUT=(a new /tmp/tierd-bench.XXXXXX, kept), CEPH_DEV_MEMSTORE_BYTES=5G,
#   CEPH_DIR= (a running deploy/ceph-dev-cluster DIR to use instead of starting
#   a fresh memstore one; left running; the image is created and removed again)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-build}" && pwd)
TIERD=$build/daemon/tierd
TIERCTL=$build/tools/tierctl
[ -x "$TIERD" ] && [ -x "$TIERCTL" ] || { echo "bench-ceph: no tierd/tierctl in $build" >&2; exit 2; }
RUNTIME=${RUNTIME:-40}
QDS=${QDS:-16 1}
SIZE=${SIZE:-2G}
TARGET=${TARGET:-512M}
HIT_SET_PERIOD=${HIT_SET_PERIOD:-10}
VARIANTS=${VARIANTS:-a b c d e}
OUT=${OUT:-$(mktemp -d /tmp/tierd-bench.XXXXXX)}
export CEPH_DEV_MEMSTORE_BYTES=${CEPH_DEV_MEMSTORE_BYTES:-5G}
mkdir -p "$OUT"
if [ -n "${CEPH_DIR:-}" ]; then
	DIR=$(cd "$CEPH_DIR" && pwd)
	[ -f "$DIR/ceph.conf" ] || { echo "bench-ceph: no cluster in $DIR" >&2; exit 2; }
	SOCK=$(mktemp -d /tmp/tierd-bench-sock.XXXXXX)   # tierd's sockets
else
	DIR=$(mktemp -d /tmp/tierd-bench-cluster.XXXXXX)
	SOCK=$DIR
fi
IMG=bench
TPID=
IMG_MADE=
PY=python3

log() { echo "[$(date +%T)] $*" >&2; }
R() { local t=$1; shift; timeout -s KILL "$t" "$@"; }
C() { R 120 ceph "$@" >>"$OUT/ceph-cli.log" 2>&1; }
bytes() { numfmt --from=iec "$1"; }

finish() {
	[ -n "$TPID" ] && kill -KILL "$TPID" 2>/dev/null
	if [ -n "${CEPH_DIR:-}" ]; then
		[ -n "$IMG_MADE" ] && R 120 rbd -c "$DIR/ceph.conf" rm "base/$IMG" >/dev/null 2>&1
		rm -rf "$SOCK"
	else
		"$root/deploy/ceph-dev-cluster" stop "$DIR" >/dev/null 2>&1 || true
		rm -rf "$DIR"
	fi
	log "results in $OUT"
}
trap finish EXIT
trap 'exit 130' INT TERM

# the one fio job; extra args pick the engine
fio_job() {
	local qd=$1 tag=$2
	shift 2
	R $((RUNTIME + 120)) fio --name=zipf --rw=randwrite --bs=4k --iodepth="$qd" \
		--random_distribution=zipf:1.1 --size="$SIZE" --randseed=1 \
		--time_based --runtime="$RUNTIME" --output-format=json \
		--output="$OUT/$tag.fio.json" "$@" >/dev/null
}
fio_rbd() { fio_job "$@" --ioengine=rbd --clientname=admin --pool=base --rbdname="$IMG"; }

# df_snap TAG: pool counters (`rados df`) once the OSDs have reported their PG
# stats, and the cache-tier counters of osd.1 (the OSD of pool cache, where
# Ceph's tier agent runs: tier_promote, tier_flush, tier_evict, ...)
df_snap() {
	C tell osd.0 flush_pg_stats || true
	C tell osd.1 flush_pg_stats || true
	sleep 3
	for _ in $(seq 1 30); do
		R 60 rados df -f json >"$OUT/$1.df.json"
		grep -q '"name":"cache"' "$OUT/$1.df.json" && break
		sleep 1
	done
	R 60 ceph tell osd.1 perf dump -f json >"$OUT/$1.osd1.json" 2>/dev/null || true
}

tier_conf_min() {   # tier_conf_min EXTRA-LINE...: tierd config, [tier] target and the lines
	cat >"$OUT/tierd.conf" <<CFG
[global]
backend = rados
listen = unix:$SOCK/tierd.sock
admin_socket = $SOCK/tierd.asok
log_level = info
[rados]
conf = $DIR/ceph.conf
base_pool = base
cache_pool = cache
[tier]
target_max_bytes = $TARGET
CFG
	printf '%s\n' "$@" >>"$OUT/tierd.conf"
	printf '[image.%s]\nrbd_image = %s\n' "$IMG" "$IMG" >>"$OUT/tierd.conf"
}

tier_conf() {   # tier_conf EXTRA-LINE...: tierd config for variants c, d, e: b's tier settings
	tier_conf_min "cache_target_dirty_ratio = 0.4" "cache_target_dirty_high_ratio = 0.6" \
		"cache_target_full_ratio = 0.8" "hit_set_type = bloom" "hit_set_count = 4" \
		"hit_set_period = $HIT_SET_PERIOD" "min_read_recency_for_promote = 1" \
		"min_write_recency_for_promote = 1" "$@"
}

tierd_start() {
	# an empty cache pool for every tierd: a new tierd does not take over the
	# objects an earlier one left (its gauges start at 0, `evict --wait` leaves
	# them, writes hit them), so purge them (their dirty data is dropped)
	R 300 rados purge cache --yes-i-really-really-mean-it >>"$OUT/ceph-cli.log" 2>&1 ||
		{ echo "bench-ceph: rados purge cache failed" >&2; exit 1; }
	"$TIERD" --config "$OUT/tierd.conf" 2>>"$OUT/tierd.log" &
	TPID=$!
	for _ in $(seq 1 300); do
		R 10 nbdinfo --size "nbd+unix:///$IMG?socket=$SOCK/tierd.sock" >/dev/null 2>&1 && return 0
		kill -0 "$TPID" 2>/dev/null || { tail "$OUT/tierd.log" >&2; exit 1; }
		sleep 0.1
	done
	echo "bench-ceph: tierd did not start" >&2
	exit 1
}
tierd_stop() {
	kill -TERM "$TPID"
	wait "$TPID" || true
	TPID=
}

native_tier_on() {
	log "native tier: add cache as writeback overlay of base"
	C osd tier add base cache
	C osd tier cache-mode cache writeback
	C osd tier set-overlay base cache
	local kv
	for kv in "hit_set_type bloom" "hit_set_count 4" "hit_set_period $HIT_SET_PERIOD" \
		"target_max_bytes $(bytes "$TARGET")" "cache_target_dirty_ratio 0.4" \
		"cache_target_dirty_high_ratio 0.6" "cache_target_full_ratio 0.8" \
		"min_read_recency_for_promote 1" "min_write_recency_for_promote 1"; do
		# shellcheck disable=SC2086
		C osd pool set cache $kv
	done
}
native_tier_off() {
	log "native tier: flush, evict and remove"
	C osd tier cache-mode cache proxy
	C osd tier remove-overlay base
	# `cache-mode none` refuses while the PG stats still count dirty objects
	for _ in $(seq 1 10); do
		R 600 rados -p cache cache-flush-evict-all >/dev/null 2>&1 || true
		C tell osd.1 flush_pg_stats >/dev/null 2>&1 || true
		sleep 2
		C osd tier cache-mode cache none --yes-i-really-mean-it && break
	done
	C osd tier remove base cache
}

run() {   # run VARIANT QD
	local v=$1 qd=$2 tag=$1-qd$2
	log "run $tag (${RUNTIME}s)"
	case $v in
	a) df_snap "$tag.before"; fio_rbd "$qd" "$tag"; df_snap "$tag.after" ;;
	b)
		R 600 rados -p cache cache-flush-evict-all >/dev/null 2>&1 || true
		df_snap "$tag.before"; fio_rbd "$qd" "$tag"; df_snap "$tag.after"
		R 60 ceph df detail -f json >"$OUT/$tag.cephdf.json"
		;;
	c | d | e | f | g)
		R 600 "$TIERCTL" --socket "$SOCK/tierd.asok" evict --wait >/dev/null
		R 30 "$TIERCTL" --socket "$SOCK/tierd.asok" perf dump >"$OUT/$tag.perf.before.json"
		df_snap "$tag.before"
		fio_job "$qd" "$tag" --ioengine=nbd --uri="nbd+unix:///$IMG?socket=$SOCK/tierd.sock"
		R 30 "$TIERCTL" --socket "$SOCK/tierd.asok" perf dump >"$OUT/$tag.perf.after.json"
		df_snap "$tag.after"
		;;
	esac
	echo "$tag" >>"$OUT/runs"
}

# ---- machine
{
	echo "date: $(date -u +%FT%TZ)"
	echo "nproc: $(nproc)"
	echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
	echo "memory: $(free -g | awk '/^Mem:/ {print $2 " GiB"}')"
	echo "ceph: $(ceph --version | awk '{print $3}')"
	echo "fio: $(fio --version)"
	echo "loadavg at start: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "tierd: $build, buildtype $("$PY" -c 'import json,sys
print(*[o["value"] for o in json.load(open(sys.argv[1])) if o["name"] in ("buildtype", "b_sanitize")])' \
		"$build/meson-info/intro-buildoptions.json" 2>/dev/null)"
} >"$OUT/machine.txt"
: >"$OUT/runs"

# ---- cluster and image
if [ -n "${CEPH_DIR:-}" ]; then
	log "using the running cluster in $DIR"
	"$root/deploy/ceph-dev-cluster" status "$DIR" >/dev/null || { echo "bench-ceph: cluster in $DIR is not healthy" >&2; exit 1; }
else
	log "starting a fresh cluster in $DIR (memstore ${CEPH_DEV_MEMSTORE_BYTES} per OSD)"
	"$root/deploy/ceph-dev-cluster" start "$DIR"
fi
eval "$("$root/deploy/ceph-dev-cluster" env "$DIR")"
export CEPH_CONF
R 60 rbd create --size "$SIZE" --image-feature layering "base/$IMG"
IMG_MADE=1
log "prefilling base/$IMG ($SIZE)"
R 600 fio --name=fill --ioengine=rbd --clientname=admin --pool=base --rbdname="$IMG" \
	--rw=write --bs=4M --iodepth=4 --size="$SIZE" --output-format=terse >/dev/null

# tierd gets the promotion throttle Ceph's OSDs apply by default
pmb=$(R 60 ceph config get osd osd_tier_promote_max_bytes_sec)
pmo=$(R 60 ceph config get osd osd_tier_promote_max_objects_sec)
throttle="promote_max_bytes_sec = $pmb
promote_max_objects_sec = $pmo"
echo "ceph promote throttle: osd_tier_promote_max_bytes_sec $pmb, osd_tier_promote_max_objects_sec $pmo" \
	>>"$OUT/machine.txt"

for v in $VARIANTS; do
	case $v in
	a) for qd in $QDS; do run a "$qd"; done ;;
	b) native_tier_on; for qd in $QDS; do run b "$qd"; done; native_tier_off ;;
	c) tier_conf "$throttle" "promote_granularity = object"; tierd_start; for qd in $QDS; do run c "$qd"; done; tierd_stop ;;
	d) tier_conf "$throttle" "promote_granularity = extent"; tierd_start
	   for qd in $QDS; do run d "$qd"; done; tierd_stop ;;
	e) tier_conf "promote_granularity = object" "promote_max_bytes_sec = 0
promote_max_objects_sec = 0"; tierd_start; for qd in $QDS; do run e "$qd"; done; tierd_stop ;;
	f) tier_conf_min; tierd_start; for qd in $QDS; do run f "$qd"; done; tierd_stop ;;
	g) tier_conf_min "tier_preset = ceph" "hit_set_period = $HIT_SET_PERIOD"; tierd_start
	   for qd in $QDS; do run g "$qd"; done; tierd_stop ;;
	esac
done
echo "loadavg at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"

# ---- table
"$PY" - "$OUT" <<'EOF' | tee "$OUT/table.md"
import json, os, sys
out = sys.argv[1]
names = {"a": "a. rbd, no tier", "b": "b. rbd, Ceph native tier",
         "c": "c. tierd, object", "d": "d. tierd, extent",
         "e": "e. tierd, object, no throttle", "f": "f. tierd, defaults",
         "g": "g. tierd, tier_preset = ceph"}
def load(p):
    try:
        return json.load(open(os.path.join(out, p)))
    except (OSError, ValueError):
        return None
def pools(df):
    return {p["name"]: p for p in df["pools"]} if df else {}
def mib(b):
    return "%.0f" % (b / 2**20)
print("| run | QD | write IOPS | p99 ms | max ms | client MiB | base rd/wr MiB | cache rd/wr MiB | promote / flush / evict / proxy-write ops | promote / flush MiB | dirty at end |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for tag in open(os.path.join(out, "runs")).read().split():
    v, qd = tag.split("-qd")
    f = load(tag + ".fio.json")
    if not f:
        continue
    w = f["jobs"][0]["write"]
    p99 = w["clat_ns"]["percentile"]["99.000000"] / 1e6
    mx = w["clat_ns"]["max"] / 1e6
    b, a = pools(load(tag + ".before.df.json")), pools(load(tag + ".after.df.json"))
    def d(pool, k):
        try:
            return mib(a[pool][k] - b[pool][k])
        except KeyError:
            return "?"
    ops, moved, dirty = "-", "-", "-"
    pa, pb = load(tag + ".perf.after.json"), load(tag + ".perf.before.json")
    oa, ob = load(tag + ".after.osd1.json"), load(tag + ".before.osd1.json")
    if pa and pb:            # tierd's own counters
        ca, cb = pa["tierd"], pb["tierd"]
        ops = " / ".join(str(ca[k] - cb[k]) for k in ("promotions", "flushes", "evictions", "proxy_writes"))
        moved = " / ".join(mib(ca[k] - cb[k]) for k in ("promote_bytes", "flush_bytes"))
        dirty = mib(pa["tierd"]["dirty_bytes"]) + " MiB"
    elif v == "b" and oa and ob:   # Ceph's OSD counters: object counts only
        ca, cb = oa["osd"], ob["osd"]
        # the agent flushes with try-flush: tier_clean counts objects made clean
        n = [ca[k] - cb[k] for k in ("tier_promote", "tier_clean", "tier_evict", "tier_proxy_write")]
        ops = " / ".join(map(str, n))
        moved = "~%d / ~%d" % (n[0] * 4, n[1] * 4)   # whole 4 MiB objects
        cd = load(tag + ".cephdf.json")
        if cd:
            dirty = "%d objects" % [p for p in cd["pools"] if p["name"] == "cache"][0]["stats"]["dirty"]
    print("| %s | %s | %.0f | %.1f | %.0f | %s | %s/%s | %s/%s | %s | %s | %s |" % (
        names.get(v, v), qd, w["iops"], p99, mx, mib(w["io_bytes"]),
        d("base", "read_bytes"), d("base", "write_bytes"),
        d("cache", "read_bytes"), d("cache", "write_bytes"), ops, moved, dirty))
EOF
