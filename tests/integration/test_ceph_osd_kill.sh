#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/integration/test_ceph_osd_kill.sh - RADOS faults under a verifying
# workload (suite 'ceph'): the cache OSD (osd.1, bluestore on a file) is
# SIGKILLed in the middle of the workload and restarted; then tierd itself is
# killed with SIGKILL and restarted.  The workload (nbd_faults.py) stamps every
# 4 KiB block with (block, sequence) and remembers what was acknowledged.
#
# Image layout (4 MiB objects), prepared before the kill:
#   clean   objects 0-1   in the cache and CLEAN; read only
#   clean2  objects 2-3   in the cache and CLEAN; written only once the OSD is dead
#   dirty   objects 4-7   in the cache and DIRTY (the only copy); reads and writes
#   base    objects 8-11  not in the cache (no promotion: recency 9); reads and writes
# What it checks:
#   osd       while osd.1 is dead no request takes longer than BOUND; tierd does
#             not crash; reads of CLEAN objects succeed (served from base) and
#             writes of objects not in the cache succeed; after start-osd
#             every request succeeds again; every acknowledged write reads back
#             through tierd, again after `tierctl flush --wait`, and in an
#             `rbd export` of the image; no read ever returned data that was
#             neither acknowledged nor possibly landed
#   stale     CLEAN cached objects written while osd.1 is dead, tierd killed
#             with -9 before osd.1 is back, then both restarted: every
#             acknowledged write reads back (the old cache copy must not win)
#   tierd     kill -9 of tierd during the workload; after a restart every
#             acknowledged write reads back, the dirty objects are found again
#             and `tierctl flush --wait` writes them back: dirty_objects 0 and
#             `rbd export` holds every acknowledged write
# Needs a ceph-dev-cluster whose osd.1 is bluestore (CEPH_DEV_CACHE_OSD_STORE=
# bluestore; deploy/ceph-test.sh starts one): CEPH_CONF is DIR/ceph.conf.
# Exits 77 without CEPH_CONF or when osd.1 is not bluestore (its data would
# not survive the kill).  Environment: CEPH_CONF, TIERD, TIERCTL;
# OK_OP_TIMEOUT (seconds, default 5), OK_OUTAGE (seconds the OSD stays dead,
# default 15).
set -euo pipefail

if [ -z "${CEPH_CONF:-}" ]; then
	echo "SKIP: CEPH_CONF is not set (deploy/ceph-dev-cluster start DIR; eval \"\$(deploy/ceph-dev-cluster env DIR)\")"
	exit 77
fi
: "${TIERD:?set TIERD to the tierd binary}"
: "${TIERCTL:?set TIERCTL to the tierctl binary}"
for p in rbd rados sha256sum nbdcopy; do
	command -v "$p" >/dev/null || { echo "FAIL: $p not installed (deploy/install-deps.sh)"; exit 1; }
done
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CLUSTER=$(cd "$(dirname "$CEPH_CONF")" && pwd)
DEVC="$ROOT/deploy/ceph-dev-cluster"
if ! [ -f "$CLUSTER/run/osd.1.pid" ] ||
   ! sed -n '/^\[osd\.1\]/,/^\[/p' "$CEPH_CONF" | grep -q '^osd objectstore = bluestore'; then
	echo "SKIP: $CEPH_CONF is not a ceph-dev-cluster with a bluestore osd.1 (CEPH_DEV_CACHE_OSD_STORE=bluestore)"
	exit 77
fi
export CEPH_CONF
PY=/usr/bin/python3
OPT=${OK_OP_TIMEOUT:-5}      # tierd's rados op_timeout, seconds
OUTAGE=${OK_OUTAGE:-15}      # how long osd.1 stays dead
# A request that needs the dead OSD may wait op_timeout for the cache op and
# op_timeout again for the fallback it takes (a REMOVE before a proxied
# write); anything beyond that plus scheduling slack is a stall.
BOUND=$((2 * OPT + 5))
T=ok$$
WORK=$(mktemp -d /tmp/tierd-osdkill.XXXXXX)
PIDS=""
IMAGES=""
PREFIXES=""
OSD_DEAD=0
fails=0

log() { echo "[$(date +%T)] $*"; }
ok() { echo "ok - [$(date +%T)] $*"; }
bad() { echo "not ok - [$(date +%T)] $*"; fails=$((fails + 1)); }
die() { echo "FAIL: $*" >&2; exit 1; }
R() { local t=$1; shift; timeout -s KILL "$t" "$@"; }
# the workload, capped at 2 GiB of address space (tierd is not: ASan's shadow
# memory needs terabytes of it)
W() { (ulimit -v 2097152; R 300 "$PY" "$HERE/nbd_faults.py" "$@"); }

cat >"$WORK/h.py" <<'EOF'
import os, sys, rados
c = rados.Rados(conffile=os.environ["CEPH_CONF"],
                conf={"rados_osd_op_timeout": "20", "rados_mon_op_timeout": "20"})
c.connect(timeout=20)
cmd, pool, pre = sys.argv[1], sys.argv[2], sys.argv[3:]
io = c.open_ioctx(pool)
names = [o.key for o in io.list_objects() if o.key.startswith(tuple(pre))]
if cmd == "ls":           # "objno flag" per object; D dirty, C clean
    for n in sorted(names):
        try:
            m = io.get_xattr(n, "tier.meta")
            i = m.find(b"TRMT")
            f = "D" if i >= 0 and m[i + 5] & 1 else "C"
        except rados.Error:
            f = "-"
        print(int(n.rsplit(".", 1)[1], 16), f)
elif cmd == "rm":
    for n in names:
        try:
            io.remove_object(n)
        except rados.ObjectNotFound:
            pass
io.close()
c.shutdown()
EOF
H() { R 120 "$PY" "$WORK/h.py" "$@"; }

cleanup() {
	local rc=$? p img
	# never leave the shared dev cluster without its cache OSD
	if [ "$OSD_DEAD" = 1 ]; then
		"$DEVC" start-osd "$CLUSTER" 1 || echo "cleanup: start-osd 1 failed" >&2
	fi
	for p in $PIDS; do kill -KILL "$p" 2>/dev/null || true; done
	for p in $PIDS; do wait "$p" 2>/dev/null || true; done
	if [ "$rc" != 0 ] || [ "$fails" != 0 ]; then
		for p in "$WORK"/*.log; do
			[ -f "$p" ] || continue
			echo "---- $(basename "$p") (tail) ----"
			tail -n 30 "$p"
		done
	fi
	[ -n "$PREFIXES" ] && H rm cache $PREFIXES tier.hitset. >/dev/null 2>&1
	for img in $IMAGES; do
		R 60 rbd rm --no-progress "base/$img" >/dev/null 2>&1 || true
	done
	rm -rf "$WORK"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

new_image() {
	R 60 rbd create --size "$2" --image-feature layering "base/$1"
	IMAGES="$IMAGES $1"
	PREFIX=$(R 60 rbd info "base/$1" | sed -n 's/.*block_name_prefix: //p')
	[ -n "$PREFIX" ] || die "no block_name_prefix for base/$1"
	PREFIXES="$PREFIXES $PREFIX."
}

# write_conf NAME IMAGE [tier lines...]: op_timeout OPT for the tierd under
# test (`fault`), 30 s for the one that prepares the image (`prep`)
write_conf() {
	local name=$1 image=$2 opt=$OPT
	[ "$1" = prep ] && opt=30
	shift 2
	{
		cat <<CFG
[global]
backend = rados
listen = unix:$WORK/$name.sock
admin_socket = $WORK/$name.asok
log_level = info
[rados]
conf = $CEPH_CONF
client_name = client.admin
base_pool = base
cache_pool = cache
op_timeout = ${opt}s
[tier]
target_max_bytes = 256M
cache_target_dirty_ratio = 0.9
cache_target_dirty_high_ratio = 0.95
cache_target_full_ratio = 0.95
hit_set_count = 8
hit_set_period = 60s
promote_max_bytes_sec = 0
promote_max_objects_sec = 0
CFG
		printf '%s\n' "$@"
		# Ceph's admission: the recency rules apply with room in the cache too
		case " $* " in *" admit_when_room ="*) ;; *) echo "admit_when_room = 0" ;; esac
		printf '[image.disk]\nrbd_image = %s\n' "$image"
	} >"$WORK/$name.conf"
}

uri() { echo "nbd+unix:///disk?socket=$WORK/$1.sock"; }

start() {
	rm -f "$WORK/$1.sock"
	"$TIERD" --config "$WORK/$1.conf" 2>>"$WORK/$1.log" &
	TPID=$!
	PIDS="$PIDS $TPID"
	for _ in $(seq 1 300); do
		if [ -S "$WORK/$1.sock" ] && R 10 nbdinfo --size "$(uri "$1")" >/dev/null 2>&1; then
			return 0
		fi
		kill -0 "$TPID" 2>/dev/null || die "tierd ($1) exited during start-up"
		sleep 0.1
	done
	die "tierd ($1) did not serve within 30 s"
}

stop() {
	local rc=0
	kill -TERM "$TPID"
	R 60 tail --pid="$TPID" -f /dev/null || true
	wait "$TPID" || rc=$?
	[ "$rc" = 0 ] && ok "SIGTERM: tierd exited 0" || bad "SIGTERM: tierd exited $rc"
}

ctl() { R 120 "$TIERCTL" --socket "$WORK/$1.asok" "${@:2}"; }
perf() {
	ctl "$1" perf dump | "$PY" -c 'import json,sys
j = json.load(sys.stdin); k = sys.argv[1]
print(j["tierd"].get(k))' "$2"
}
# js FILE KEY: a field of the JSON summary (last line) nbd_faults.py run printed
js() { tail -n 1 "$1" | "$PY" -c 'import json,sys
j = json.load(sys.stdin)
for k in sys.argv[1].split("."): j = j.get(k, [0, 0, 0]) if isinstance(j, dict) else j
print(j)' "$2"; }
# by FILE REGION/PHASE/CMD INDEX: ok (0), failed (1) or max latency (2)
by() { tail -n 1 "$1" | "$PY" -c 'import json,sys
j = json.load(sys.stdin)["by"]
print(j.get(sys.argv[1], [0, 0, 0])[int(sys.argv[2])])' "$2" "$3"; }
lt() { "$PY" -c 'import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)' "$1" "$2"; }

verify_nbd() {   # NAME WHAT
	if W verify "$WORK/$1.sock" disk "$WORK/state.json" >"$WORK/verify.out" 2>&1; then
		ok "$2: $(tail -n 1 "$WORK/verify.out")"
	else
		bad "$2: $(cat "$WORK/verify.out")"
	fi
}
verify_export() {   # IMAGE WHAT
	rm -f "$WORK/export.img"
	if R 120 rbd export --no-progress "base/$1" "$WORK/export.img" >/dev/null 2>&1 &&
	   W check "$WORK/export.img" "$WORK/state.json" >"$WORK/check.out" 2>&1; then
		ok "$2: $(tail -n 1 "$WORK/check.out")"
	else
		bad "$2: $(cat "$WORK/check.out" 2>/dev/null)"
	fi
	rm -f "$WORK/export.img"
}

SLOTS_PER_OBJ=1024   # 4 MiB objects, 4 KiB slots
o2s() { echo $(($1 * SLOTS_PER_OBJ)); }

# ================================================================ prepare
log "== prepare: objects 0-3 clean in the cache, 4-7 dirty, 8-11 not cached"
t_start=$(date +%s)
new_image "$T" 64M
IMG=$T PRE=$PREFIX
write_conf prep "$IMG" "min_write_recency_for_promote = 0" "write_miss = promote"
start prep
W fill "$WORK/prep.sock" disk "$WORK/state.json" "$(o2s 0):$(o2s 4)" >/dev/null ||
	die "filling objects 0-3 failed"
ctl prep flush --wait >/dev/null || die "flush --wait failed"
W fill "$WORK/prep.sock" disk "$WORK/state.json" "$(o2s 4):$(o2s 4)" >/dev/null ||
	die "filling objects 4-7 failed"
stop
H ls cache "$PRE." >"$WORK/cache.ls"
[ "$(awk '$1 <= 3 && $2 == "C"' "$WORK/cache.ls" | wc -l)" = 4 ] &&
[ "$(awk '$1 >= 4 && $1 <= 7 && $2 == "D"' "$WORK/cache.ls" | wc -l)" = 4 ] &&
[ "$(awk '$1 >= 8' "$WORK/cache.ls" | wc -l)" = 0 ] &&
	ok "prepared: cache objects 0-3 clean, 4-7 dirty, none of 8-11" ||
	bad "prepared layout wrong: $(tr '\n' ' ' <"$WORK/cache.ls")"

# the workload's tierd: no promotion (recency 9 with 60 s hitsets, and no
# admission for room: admit_when_room = 0), the map rebuilt from the cache
# pool at start-up
write_conf fault "$IMG" "min_write_recency_for_promote = 9" "min_read_recency_for_promote = 9" \
	"admit_when_room = 0"
start fault
SPEC=("clean:$(o2s 0):$(o2s 2):r" "clean2:$(o2s 2):$(o2s 2):w-late" "dirty:$(o2s 4):$(o2s 4):rw" "base:$(o2s 8):$(o2s 4):rw")

# ================================================================ osd
log "== osd: SIGKILL the cache OSD (osd.1, bluestore) mid-workload, ${OUTAGE} s later start it again (op_timeout ${OPT}s)"
mkdir -p "$WORK/phase"
RUN_S=$((5 + OUTAGE + 120))   # ended by $WORK/phase/stop, 10 s after start-osd
W run "$WORK/fault.sock" disk "$WORK/state.json" "$RUN_S" "$WORK/phase" "${SPEC[@]}" \
	>"$WORK/run1.out" 2>&1 &
rpid=$!
sleep 5
t_kill=$(date +%s%3N)
OSD_DEAD=1
touch "$WORK/phase/killed"
"$DEVC" kill-osd "$CLUSTER" 1 2>&1 | sed 's/^/  /'
sleep "$OUTAGE"
kill -0 "$TPID" 2>/dev/null && ok "tierd still running after ${OUTAGE} s without the cache OSD" ||
	bad "tierd died while the cache OSD was down"
"$DEVC" start-osd "$CLUSTER" 1 2>&1 | sed 's/^/  /'
OSD_DEAD=0
touch "$WORK/phase/restarted"
log "osd.1 back $(( ($(date +%s%3N) - t_kill) / 1000 )) s after the kill"
sleep 10
touch "$WORK/phase/stop"
rrc=0
wait "$rpid" || rrc=$?
sed 's/^/  /' "$WORK/run1.out" | head -n -1
[ "$rrc" = 0 ] && ok "workload: no read returned data that was never written" ||
	bad "workload exited $rrc: $(grep -v '^run: ' "$WORK/run1.out" | tail -3)"
kill -0 "$TPID" 2>/dev/null && ok "tierd survived the OSD kill" || bad "tierd died"
grep -q '"server_closed": false' "$WORK/run1.out" && ok "the NBD connection stayed up" ||
	bad "tierd closed the connection during the OSD outage"

acked1=$(js "$WORK/run1.out" acked) failed1=$(js "$WORK/run1.out" failed)
rok1=$(js "$WORK/run1.out" reads_ok) rfail1=$(js "$WORK/run1.out" reads_failed)
stall1=$(js "$WORK/run1.out" max_latency)
log "osd figures: writes acknowledged $acked1, failed $failed1; reads ok $rok1, failed $rfail1; longest request ${stall1} s (bound ${BOUND} s)"
lt "$stall1" "$BOUND" && ok "longest request ${stall1} s < ${BOUND} s (2 x op_timeout + 5 s): no hang" ||
	bad "a request took ${stall1} s with op_timeout ${OPT}s (bound ${BOUND} s)"
# outage expectations, region by region
n=$(by "$WORK/run1.out" clean/outage/read 0) f=$(by "$WORK/run1.out" clean/outage/read 1)
[ "$n" -gt 0 ] && [ "$f" = 0 ] && ok "outage: $n reads of CLEAN cached objects served (from base), none failed" ||
	bad "outage: reads of CLEAN cached objects: $n ok, $f failed (the base copy is identical: none should fail)"
# Writes to cached objects need the cache pool (the copy must be updated or
# removed before base may change; docs/DURABILITY.md "Pool outages"): while
# osd.1 is dead they fail with EIO within the bound above, changing nothing.
n=$(by "$WORK/run1.out" clean2/outage/write 0) f=$(by "$WORK/run1.out" clean2/outage/write 1)
ok "outage: writes to CLEAN cached objects: $n succeeded, $f failed with an error (allowed: bounded wait, then EIO)"
n=$(by "$WORK/run1.out" base/outage/write 0) f=$(by "$WORK/run1.out" base/outage/write 1)
[ "$n" -gt 0 ] && [ "$f" = 0 ] && ok "outage: $n writes to uncached objects went to base, none failed" ||
	bad "outage: writes to uncached objects: $n ok, $f failed"
n=$(by "$WORK/run1.out" dirty/outage/write 0) f=$(by "$WORK/run1.out" dirty/outage/write 1)
ok "outage: writes needing the only (dirty) copy: $n succeeded, $f failed with an error (allowed: bounded wait, then EIO)"
fa=0
for k in clean/after/read clean2/after/write dirty/after/read dirty/after/write base/after/read base/after/write; do
	fa=$((fa + $(by "$WORK/run1.out" "$k" 1)))
done
n=$(( $(by "$WORK/run1.out" dirty/after/write 0) + $(by "$WORK/run1.out" dirty/after/read 0) ))
[ "$fa" = 0 ] && [ "$n" -gt 0 ] && ok "after start-osd: $n requests on the dirty objects, no request failed" ||
	bad "after start-osd: $fa requests failed ($n ok on the dirty objects)"

verify_nbd fault "after the OSD restart every acknowledged write reads back through tierd"
ctl fault flush --wait >/dev/null && ok "tierctl flush --wait after the OSD restart" ||
	bad "tierctl flush --wait failed after the OSD restart"
d=$(perf fault dirty_objects)
[ "$d" = 0 ] && ok "dirty_objects 0 after the flush" || bad "dirty_objects $d after the flush"
verify_nbd fault "after the flush every acknowledged write reads back through tierd"
verify_export "$IMG" "after the flush rbd export holds every acknowledged write"
ce=$(perf fault cache_errors)
log "tierd counted $ce cache pool errors; $(grep -c 'cache pool error' "$WORK/fault.log" || true) warnings logged"
log "cache pool after the flush (objno flag): $(H ls cache "$PRE." | tr '\n' ' ')"

# ================================================================ stale
# A write to a CLEAN cached object while the cache OSD is dead, acknowledged,
# then tierd killed before the OSD is back: the old cache copy must not come
# back as CLEAN over the acknowledged write in base.
log "== stale: write CLEAN cached objects 12-13 with osd.1 dead, kill -9 tierd, start osd.1, restart tierd"
stop
write_conf prep "$IMG" "min_write_recency_for_promote = 0" "write_miss = promote"
start prep
W fill "$WORK/prep.sock" disk "$WORK/state.json" "$(o2s 12):$(o2s 2)" >/dev/null ||
	die "filling objects 12-13 failed"
ctl prep flush --wait >/dev/null || die "flush --wait failed"
stop
start fault
rm -rf "$WORK/phase" && mkdir -p "$WORK/phase" && touch "$WORK/phase/killed"
OSD_DEAD=1
"$DEVC" kill-osd "$CLUSTER" 1 2>&1 | sed 's/^/  /'
W run "$WORK/fault.sock" disk "$WORK/state.json" 8 "$WORK/phase" "stale:$(o2s 12):$(o2s 2):w-late" \
	>"$WORK/run3.out" 2>&1 || true
sed 's/^/  /' "$WORK/run3.out" | head -n -1
acked3=$(js "$WORK/run3.out" acked) failed3=$(js "$WORK/run3.out" failed)
stall3=$(js "$WORK/run3.out" max_latency)
lt "$stall3" "$BOUND" && ok "stale: longest write to a CLEAN object with osd.1 dead ${stall3} s < ${BOUND} s" ||
	bad "stale: a write to a CLEAN cached object took ${stall3} s with osd.1 dead (op_timeout ${OPT}s, bound ${BOUND} s): requests on one object pay the timeouts one after another"
ok "stale: $acked3 writes to CLEAN cached objects acknowledged, $failed3 failed with EIO with osd.1 dead (writes to cached objects need the cache pool)"
kill -KILL "$TPID"
wait "$TPID" 2>/dev/null || true
"$DEVC" start-osd "$CLUSTER" 1 2>&1 | sed 's/^/  /'
OSD_DEAD=0
start fault
log "stale figures: $acked3 writes to CLEAN cached objects acknowledged with osd.1 dead, $failed3 failed; cache pool now: $(H ls cache "$PRE." | tr '\n' ' ')"
verify_nbd fault "writes acknowledged while osd.1 was dead, tierd killed before it returned: every one reads back"

# ================================================================ tierd
log "== tierd: kill -9 of tierd with the workload running, restart, flush"
rm -rf "$WORK/phase" && mkdir -p "$WORK/phase"
SPEC2=("clean:$(o2s 0):$(o2s 2):rw" "clean2:$(o2s 2):$(o2s 2):rw" "dirty:$(o2s 4):$(o2s 4):rw" "base:$(o2s 8):$(o2s 4):rw")
W run "$WORK/fault.sock" disk "$WORK/state.json" 60 "$WORK/phase" "${SPEC2[@]}" >"$WORK/run2.out" 2>&1 &
rpid=$!
sleep 6
kill -KILL "$TPID"
wait "$TPID" 2>/dev/null || true
rrc=0
wait "$rpid" || rrc=$?
sed 's/^/  /' "$WORK/run2.out" | head -n -1
[ "$rrc" = 0 ] && grep -q '"server_closed": true' "$WORK/run2.out" &&
	ok "kill -9 of tierd ended the workload; no wrong read before it" ||
	bad "workload around the tierd kill exited $rrc: $(tail -3 "$WORK/run2.out")"
acked2=$(js "$WORK/run2.out" acked) inflight2=$(js "$WORK/run2.out" inflight_at_end)
log "tierd-kill figures: writes acknowledged $acked2, in flight at the kill $inflight2, failed $(js "$WORK/run2.out" failed)"
start fault
# the export answers while the map is still being rebuilt: wait for "ready"
for _ in $(seq 1 300); do
	ctl fault images 2>/dev/null | grep -q '"ready": true' && break
	sleep 0.1
done
d=$(perf fault dirty_objects)
[ "$d" -gt 0 ] && ok "after kill -9 + restart: $d dirty objects found again" ||
	bad "after kill -9 + restart: dirty_objects=$d"
verify_nbd fault "after kill -9 + restart every acknowledged write reads back"
ctl fault flush --wait >/dev/null && ok "tierctl flush --wait after the restart" || bad "flush --wait failed"
d=$(perf fault dirty_objects)
[ "$d" = 0 ] && ok "dirty objects from before the kill flushed (dirty_objects 0)" ||
	bad "dirty_objects $d after the flush"
verify_export "$IMG" "after the flush rbd export holds every acknowledged write"
sha_n=$(R 120 nbdcopy "$(uri fault)" - | sha256sum | cut -d' ' -f1)
sha_e=$(R 120 rbd export --no-progress "base/$IMG" - 2>/dev/null | sha256sum | cut -d' ' -f1)
[ "$sha_n" = "$sha_e" ] && ok "whole image: rbd export == read through tierd (sha256)" ||
	bad "whole image: rbd export differs from tierd"
nslots=$("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["slots"]))' "$WORK/state.json")
ctl fault evict --wait >/dev/null || true
stop

log "summary: OSD kill: $acked1 writes acknowledged, $failed1 failed, $rok1 reads ok, $rfail1 failed, longest request ${stall1} s (op_timeout ${OPT}s); stale: $acked3 acknowledged, $failed3 failed, longest ${stall3} s; tierd kill: $acked2 acknowledged, $inflight2 in flight; $nslots slots verified 4 times; $(( $(date +%s) - t_start )) s"
if [ "$fails" -gt 0 ]; then
	echo "$fails check(s) failed"
	exit 1
fi
echo "all checks passed"
