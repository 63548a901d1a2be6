#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/integration/test_ceph_tier.sh - the real tierd (backend = rados) on a
# real Ceph cluster, serving RBD images of pool `base` with pool `cache` as its
# cache (suite 'ceph').  Every client runs under `timeout -s KILL`; every tierd
# started here is killed on exit.  Sections, each naming what it proves:
#   io        nbdcopy of a random file and fio --verify=crc32c through tierd;
#             dirty objects carry tier.meta with the dirty flag; after
#             `tierctl flush --wait` the flags are clear, `rbd export` equals
#             what was written (sha256) and fio verifies the base image
#             through librbd (ioengine=rbd), without tierd
#   restart   SIGTERM exits 0 and the data reads back; with writes in flight,
#             kill -9: every acknowledged write reads back after a restart, the
#             dirty objects from before the kill are found again, flushed by
#             `tierctl flush --wait`, and `rbd export` matches
#   mix       min_write_recency_for_promote above what the hitsets can show:
#             writes are proxied into base objects, no cache object; with 0 they
#             land in cache objects and base stays stale until a flush
#   agent     target_max_bytes 16M under a 64M workload: the image's bytes in
#             the cache pool stay within the target plus a bounded overshoot
#             (see SLACK) while writing, within the target once the agent has
#             caught up, and the export equals what was written
#   refuse    object-map image (names `rbd feature disable`), a second tierd on
#             a served image (standby, naming the holder; with the first
#             one's socket paths, refused without touching them), a wrong keyring (names the
#             monitors and the cephx id): tierd exits non-zero; while tierd
#             serves, `rbd lock ls` and `rbd status` name its client, and
#             after it stops neither does
# Environment: CEPH_CONF (required; exit 77 when unset), TIERD, TIERCTL.
# CT_SECTIONS="io restart mix agent refuse outage" selects sections (default all).
set -euo pipefail

if [ -z "${CEPH_CONF:-}" ]; then
	echo "SKIP: CEPH_CONF is not set (deploy/ceph-dev-cluster start DIR; eval \"\$(deploy/ceph-dev-cluster env DIR)\")"
	exit 77
fi
: "${TIERD:?set TIERD to the tierd binary}"
: "${TIERCTL:?set TIERCTL to the tierctl binary}"
for p in rbd rados nbdinfo nbdcopy fio sha256sum ceph-authtool; do
	command -v "$p" >/dev/null || { echo "FAIL: $p not installed (deploy/install-deps.sh)"; exit 1; }
done
export CEPH_CONF
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3          # Debian's python: the rados module loads only there
SECTIONS=${CT_SECTIONS:-io restart mix agent refuse outage}
T=ct$$                       # image name prefix, unique per run
WORK=$(mktemp -d /tmp/tierd-ceph-it.XXXXXX)
PIDS=""                      # every tierd started here
IMAGES=""                    # every rbd image created here
PREFIXES=""                  # their object prefixes, for cache pool clean-up
fails=0

log() { echo "[$(date +%T)] $*"; }
ok() { echo "ok - $*"; }
bad() { echo "not ok - $*"; fails=$((fails + 1)); }
die() { echo "FAIL: $*" >&2; exit 1; }
R() { local t=$1; shift; timeout -s KILL "$t" "$@"; }

# ---- small RADOS helper (one client process per call) ----
cat >"$WORK/h.py" <<'EOF'
import os, sys, time, rados
c = rados.Rados(conffile=os.environ["CEPH_CONF"],
                conf={"rados_osd_op_timeout": "20", "rados_mon_op_timeout": "20"})
c.connect(timeout=20)
cmd, pool = sys.argv[1], sys.argv[2]
io = c.open_ioctx(pool)

def objs(prefixes):
    return [o.key for o in io.list_objects() if o.key.startswith(tuple(prefixes))]

def flag(name):
    # tier.meta = the store's 16-byte record header, then the engine's record
    # ("TRMT", format, flags, ...): D = dirty flag set, C = clear.
    try:
        m = io.get_xattr(name, "tier.meta")
    except rados.Error:
        return "-"
    i = m.find(b"TRMT")
    if i < 0 or len(m) < i + 40:
        return "?"
    return "D" if m[i + 5] & 1 else "C"

if cmd == "ls":            # POOL PREFIX: "name size flag" per object
    for n in sorted(objs(sys.argv[3:])):
        print(n, io.stat(n)[0], flag(n))
elif cmd == "rm":          # POOL PREFIX...: remove matching objects
    for n in objs(sys.argv[3:]):
        try:
            io.remove_object(n)
        except rados.ObjectNotFound:
            pass
elif cmd == "watch":       # POOL STOPFILE PREFIX: max bytes/objects until STOPFILE
    stop, pre = sys.argv[3], sys.argv[4:]
    mb = mo = 0
    while True:
        last = os.path.exists(stop)
        b = n = 0
        for o in objs(pre):
            try:
                b += io.stat(o)[0]
                n += 1
            except rados.ObjectNotFound:
                pass
        mb, mo = max(mb, b), max(mo, n)
        if last:
            break
        time.sleep(0.2)
    print(mb, mo)
io.close()
c.shutdown()
EOF
H() { R 120 "$PY" "$WORK/h.py" "$@"; }

cleanup() {
	local rc=$? p img
	# never leave the dev cluster's OSD frozen by section_outage
	[ -n "${FROZEN:-}" ] && kill -CONT "$FROZEN" 2>/dev/null
	for p in $PIDS; do kill -KILL "$p" 2>/dev/null || true; done
	for p in $PIDS; do wait "$p" 2>/dev/null || true; done
	if [ "$rc" != 0 ] || [ "$fails" != 0 ]; then
		for p in "$WORK"/*.log; do
			[ -f "$p" ] || continue
			echo "---- $(basename "$p") (tail) ----"
			tail -n 25 "$p"
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

# new_image NAME SIZE [FEATURES]: create; sets PREFIX to its object prefix
new_image() {
	R 60 rbd create --size "$2" --image-feature "${3:-layering}" "base/$1"
	IMAGES="$IMAGES $1"
	PREFIX=$(R 60 rbd info "base/$1" | sed -n 's/.*block_name_prefix: //p')
	[ -n "$PREFIX" ] || die "no block_name_prefix for base/$1"
	PREFIXES="$PREFIXES $PREFIX."
}

# write_conf NAME IMAGE [tier lines...]: $WORK/NAME.conf serving IMAGE as
# export "disk" on $WORK/NAME.sock, admin socket $WORK/NAME.asok
write_conf() {
	local name=$1 image=$2
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
op_timeout = 20s
[tier]
CFG
		printf '%s\n' "$@"
		case " $* " in *" hit_set_period ="*) ;; *) echo "hit_set_period = 2s" ;; esac
		# these sections count promotions, not the default throttle (Ceph's 5M/25 per s)
		case " $* " in *" promote_max_"*) ;; *) printf 'promote_max_bytes_sec = 0\npromote_max_objects_sec = 0\n' ;; esac
		# they were written for whole-object promotions (the default is extent)
		case " $* " in *" promote_granularity ="*) ;; *) echo "promote_granularity = object" ;; esac
		# and for Ceph's admission: the recency rules apply with room in the cache too
		case " $* " in *" admit_when_room ="*) ;; *) echo "admit_when_room = 0" ;; esac
		printf '[image.disk]\nrbd_image = %s\n' "$image"
	} >"$WORK/$name.conf"
}

uri() { echo "nbd+unix:///disk?socket=$WORK/$1.sock"; }

# start NAME: run tierd on $WORK/NAME.conf; sets TPID once it serves
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

# stop: SIGTERM $TPID; its exit status must be 0
stop() {
	local rc=0
	kill -TERM "$TPID"
	R 60 tail --pid="$TPID" -f /dev/null || true
	wait "$TPID" || rc=$?
	[ "$rc" = 0 ] && ok "SIGTERM: tierd exited 0" || bad "SIGTERM: tierd exited $rc"
}

ctl() { R 120 "$TIERCTL" --socket "$WORK/$1.asok" "${@:2}"; }
# perf NAME KEY: a counter or gauge from `tierctl perf dump`
perf() {
	ctl "$1" perf dump | "$PY" -c 'import json,sys
j = json.load(sys.stdin); k = sys.argv[1]
print(j["tierd"].get(k))' "$2"
}
sha_nbd() { R 120 nbdcopy "$(uri "$1")" - | sha256sum | cut -d' ' -f1; }
sha_export() { R 120 rbd export --no-progress "base/$1" - | sha256sum | cut -d' ' -f1; }
# sha of the first N MiB of an export
sha_export_head() {
	R 120 rbd export --no-progress "base/$1" - 2>/dev/null | head -c $(($2 << 20)) |
		sha256sum | cut -d' ' -f1
}

# fio_zipf ENGINE-ARGS...: the verify job (4 KiB randwrite, zipf:1.1, QD 16) on
# [64M, 96M); extra args select the engine and the mode
fio_zipf() {
	R 240 fio --name=ct --rw=randwrite --bs=4k --iodepth=16 --offset=64M --size=32M \
		--io_size=16M --random_distribution=zipf:1.1 --randseed=4242 \
		--verify=crc32c --serialize_overlap=1 --verify_fatal=1 \
		--output-format=terse --terse-version=3 "$@"
}
fio_rbd() { fio_zipf --ioengine=rbd --clientname=admin --pool=base --rbdname="$1" "${@:2}"; }

# ================================================================ io
section_io() {
	log "== io: nbdcopy + fio verify through tierd, flush, rbd export"
	new_image "$T-io" 128M
	IO_IMG=$T-io IO_PREFIX=$PREFIX
	write_conf io "$IO_IMG" "target_max_bytes = 256M" "cache_target_dirty_ratio = 0.9" \
		"cache_target_dirty_high_ratio = 0.95" "cache_target_full_ratio = 0.95" \
		"min_write_recency_for_promote = 0"
	start io
	IO_PID=$TPID
	head -c 32M /dev/urandom >"$WORK/rand32"
	R 120 nbdcopy "$WORK/rand32" "$(uri io)" && ok "nbdcopy 32 MiB random file into tierd" ||
		bad "nbdcopy into tierd failed"
	if out=$(fio_zipf --ioengine=nbd --uri="$(uri io)" --do_verify=1); then
		ok "fio randwrite zipf:1.1 QD16 with crc32c verify through tierd ($(echo "$out" |
			awk -F';' 'NF > 100 {print $49 " write IOPS"}'))"
	else
		echo "$out"; bad "fio verify through tierd"
	fi
	H ls cache "$IO_PREFIX." >"$WORK/cache-before"
	local nd
	nd=$(awk '$3 == "D"' "$WORK/cache-before" | wc -l)
	[ "$nd" -gt 0 ] && ok "before flush: $nd cache objects carry tier.meta with the dirty flag" ||
		bad "no dirty cache object before flush: $(cat "$WORK/cache-before")"

	ctl io flush --wait >/dev/null && ok "tierctl flush --wait" || bad "tierctl flush --wait failed"
	[ "$(perf io dirty_bytes)" = 0 ] && ok "dirty_bytes 0 after flush" ||
		bad "dirty_bytes $(perf io dirty_bytes) after flush"

	H ls cache "$IO_PREFIX." >"$WORK/cache-after"
	local n nc
	n=$(wc -l <"$WORK/cache-after")
	nc=$(awk '$3 == "C"' "$WORK/cache-after" | wc -l)
	# 32 MiB nbdcopy = objects 0..7, the fio range = objects 16..23
	if [ "$n" -ge 16 ] && [ "$nc" = "$n" ]; then
		ok "rados -p cache ls: $n objects $IO_PREFIX.*, each with tier.meta, all clean"
	else
		bad "cache pool after flush: $n objects, $nc clean: $(head -5 "$WORK/cache-after")"
	fi
	local o
	o=$(awk 'NR == 1 {print $1}' "$WORK/cache-after")
	if [ -n "$o" ] && R 30 rados -p cache getxattr "$o" tier.meta | grep -qa TRMT; then
		ok "rados -p cache getxattr $o tier.meta shows the TRMT record"
	else
		bad "rados getxattr tier.meta on '$o'"
	fi

	[ "$(sha_export_head "$IO_IMG" 32)" = "$(sha256sum <"$WORK/rand32" | cut -d' ' -f1)" ] &&
		ok "rbd export: first 32 MiB equal the nbdcopy'd file (sha256)" ||
		bad "rbd export differs from the nbdcopy'd file"
	if out=$(fio_rbd "$IO_IMG" --verify_only 2>&1); then
		ok "fio --verify_only through librbd (no tierd): the base image holds fio's writes"
	else
		echo "$out" | tail -5; bad "fio verify through librbd after flush"
	fi
	IO_SHA=$(sha_nbd io)
	[ "$IO_SHA" = "$(sha_export "$IO_IMG")" ] &&
		ok "whole image: rbd export == read through tierd" ||
		bad "whole image: rbd export != read through tierd"
}

# ================================================================ restart
section_restart() {
	[ -n "${IO_PID:-}" ] || die "restart needs section io"
	log "== restart: SIGTERM, then kill -9 with writes in flight"
	TPID=$IO_PID
	stop
	start io
	[ "$(sha_nbd io)" = "$IO_SHA" ] && ok "after SIGTERM + restart the image reads back unchanged" ||
		bad "image changed across SIGTERM + restart"
	local listed mapped
	listed=$(H ls cache "$IO_PREFIX." | wc -l)
	mapped=$(perf io cached_objects)
	[ "$listed" = "$mapped" ] && ok "restart rebuilt the map: $mapped cached objects, as listed in the pool" ||
		bad "restart: map has $mapped cached objects, the cache pool lists $listed"

	# the writer below treats never-acknowledged slots as zeros: start from zeros
	head -c 16M /dev/zero >"$WORK/zero16"
	R 120 nbdcopy "$WORK/zero16" "$(uri io)" || bad "nbdcopy of 16 MiB of zeros failed"

	R 150 "$PY" "$HERE/nbd_drain.py" write "$WORK/io.sock" disk "$WORK/acked.json" \
		>"$WORK/writer.out" 2>&1 &
	local wpid=$!
	sleep 4
	kill -KILL "$TPID"
	wait "$TPID" 2>/dev/null || true
	wait "$wpid" && ok "kill -9 with writes in flight: $(cat "$WORK/writer.out")" ||
		bad "writer saw no acknowledged write: $(cat "$WORK/writer.out")"

	start io
	local d
	d=$(perf io dirty_objects)
	[ "$d" -gt 0 ] && ok "after kill -9 + restart: $d dirty objects found again in the cache pool" ||
		bad "after kill -9 + restart no dirty object was found (dirty_objects=$d)"
	if R 120 "$PY" "$HERE/nbd_drain.py" verify "$WORK/io.sock" disk "$WORK/acked.json" \
		>"$WORK/verify.out" 2>&1; then
		ok "every acknowledged write reads back ($(cat "$WORK/verify.out"))"
	else
		bad "acknowledged writes lost: $(cat "$WORK/verify.out")"
	fi
	ctl io flush --wait >/dev/null || bad "flush --wait after restart failed"
	[ "$(perf io dirty_objects)" = 0 ] && ok "dirty objects from before the kill flushed" ||
		bad "dirty_objects $(perf io dirty_objects) after flush"
	IO_SHA=$(sha_nbd io)
	[ "$IO_SHA" = "$(sha_export "$IO_IMG")" ] &&
		ok "after the flush rbd export == read through tierd (acknowledged writes included)" ||
		bad "rbd export differs from tierd after kill -9 + flush"
	ctl io evict --wait >/dev/null || bad "evict --wait failed"
	stop
	IO_PID=
}

# ================================================================ mix
# fio_seq NAME OFFSET: 16 MiB sequential verified write at OFFSET through tierd
fio_seq() {
	R 120 fio --name=seq --ioengine=nbd --uri="$(uri "$1")" --rw=write --bs=64k --iodepth=8 \
		--offset="$2" --size=16M --verify=crc32c --verify_fatal=1 --do_verify=1 \
		--output-format=terse --terse-version=3 >"$WORK/fio-seq.out" 2>&1
}
# mix_conf IMAGE [LINE...]: recency 0, nothing for the agent to do
mix_conf() {
	write_conf mix "$1" "target_max_bytes = 256M" "cache_target_dirty_ratio = 0.9" \
		"cache_target_dirty_high_ratio = 0.95" "hit_set_count = 8" \
		"hit_set_period = 60s" "min_write_recency_for_promote = 0" "${@:2}"
}
objnos() { sed -n "s/^$1\.0*\([0-9a-f]\{1,\}\) .*/\1/p" | tr '\n' ' ' | sed 's/ $//'; }

section_mix() {
	log "== mix: proxy with a high min_write_recency_for_promote, cache with 0"
	new_image "$T-mix" 64M
	local img=$T-mix pre=$PREFIX got
	# recency 9 needs 8 consecutive archived hitsets; with a 60 s period none
	# is archived during the test, so no object can qualify (admit_when_room
	# = 0: the rule applies with room in the cache too)
	write_conf mix "$img" "target_max_bytes = 256M" "cache_target_dirty_ratio = 0.9" \
		"cache_target_dirty_high_ratio = 0.95" "hit_set_count = 8" "hit_set_period = 60s" \
		"min_write_recency_for_promote = 9" "min_read_recency_for_promote = 9" \
		"admit_when_room = 0"
	start mix
	MIX_PID=$TPID
	fio_seq mix 0 && ok "16 MiB written at offset 0 (recency 9)" || bad "fio seq write failed"
	got=$(H ls base "$pre." | objnos "$pre")
	[ "$got" = "0 1 2 3" ] && ok "recency 9: rados -p base ls shows objects 0-3 written directly (proxy)" ||
		bad "recency 9: base objects '$got', want '0 1 2 3'"
	got=$(H ls cache "$pre." | objnos "$pre")
	[ -z "$got" ] && ok "recency 9: no cache object for the image" ||
		bad "recency 9: cache objects '$got', want none"
	[ "$(perf mix promotions)" = 0 ] && [ "$(perf mix proxy_writes)" -gt 0 ] &&
		ok "recency 9: counters show proxy writes and no promotion" ||
		bad "recency 9: promotions=$(perf mix promotions) proxy_writes=$(perf mix proxy_writes)"
	stop

	# recency 0, write_miss = promote: a write miss waits for the promotion
	# and lands in the cache object; the base pool is not touched
	mix_conf "$img" "write_miss = promote"
	start mix
	fio_seq mix 32M && ok "16 MiB written at offset 32M (recency 0, write_miss promote)" ||
		bad "fio seq write failed"
	got=$(H ls cache "$pre." | awk '$3 == "D"' | objnos "$pre")
	[ "$got" = "8 9 a b" ] && ok "recency 0: objects 8-b are dirty cache objects" ||
		bad "recency 0: dirty cache objects '$got', want '8 9 a b'"
	got=$(H ls base "$pre." | objnos "$pre")
	[ "$got" = "0 1 2 3" ] && ok "recency 0: base objects 8-b not written before a flush" ||
		bad "recency 0: base objects '$got' before flush, want '0 1 2 3'"
	stop

	# recency 0, write_miss = proxy (the default): the first write to an
	# object goes to base, the object is promoted behind it, later writes
	# land in the cache object
	mix_conf "$img"
	start mix
	MIX_PID=$TPID
	fio_seq mix 48M && ok "16 MiB written at offset 48M (recency 0, write_miss proxy)" ||
		bad "fio seq write failed"
	for _ in $(seq 1 50); do
		got=$(H ls cache "$pre." | objnos "$pre")
		[ "$got" = "8 9 a b c d e f" ] && break
		sleep 0.2
	done
	[ "$got" = "8 9 a b c d e f" ] && ok "recency 0, write_miss proxy: objects c-f promoted into the cache" ||
		bad "recency 0, write_miss proxy: cache objects '$got', want '8 9 a b c d e f'"
	[ "$(perf mix promotions)" -ge 4 ] && ok "recency 0, write_miss proxy: $(perf mix promotions) promotions" ||
		bad "recency 0, write_miss proxy: promotions=$(perf mix promotions)"
	ctl mix flush --wait >/dev/null || bad "flush --wait failed"
	got=$(H ls base "$pre." | objnos "$pre")
	[ "$got" = "0 1 2 3 8 9 a b c d e f" ] && ok "after flush the base pool has objects 0-3 and 8-f" ||
		bad "after flush base objects '$got'"
	[ "$(sha_nbd mix)" = "$(sha_export "$img")" ] && ok "mix: rbd export == read through tierd" ||
		bad "mix: rbd export differs from tierd"
	ctl mix evict --wait >/dev/null || bad "evict --wait failed"
	# keep this tierd running: section refuse starts a second one on the image
}

# ================================================================ agent
# Admission compares the completed cached bytes with the target; promotions
# already admitted or queued are not reserved against it (reported in
# /work/notes/bugs.md), so while writing the cache can pass the target by the
# promotions in flight.  No document bounds that; SLACK allows 4 objects at
# client queue depth 4 (measured: at most 3 extra objects over several runs,
# with write_miss promote and proxy).  Once the agent has caught up the bound
# is the target itself.
AGENT_QD=4
SLACK=$((AGENT_QD * (4 << 20)))
section_agent() {
	log "== agent: target_max_bytes 16M under a 64 MiB workload"
	new_image "$T-agent" 128M
	local img=$T-agent pre=$PREFIX target=$((16 << 20)) max n wpid
	write_conf agent "$img" "target_max_bytes = 16M" "cache_target_dirty_ratio = 0.4" \
		"cache_target_dirty_high_ratio = 0.6" "cache_target_full_ratio = 0.8" \
		"min_write_recency_for_promote = 0" "hit_set_count = 8" \
		"min_read_recency_for_promote = 9" "hit_set_period = 1s"
	start agent
	rm -f "$WORK/stop"
	H watch cache "$WORK/stop" "$pre." >"$WORK/watch.out" &
	wpid=$!
	head -c 64M /dev/urandom >"$WORK/rand64"
	R 180 nbdcopy --requests=$AGENT_QD "$WORK/rand64" "$(uri agent)" && ok "nbdcopy 64 MiB into a 16 MiB cache" ||
		bad "nbdcopy failed"
	if out=$(fio_zipf --ioengine=nbd --uri="$(uri agent)" --io_size=8M --iodepth=$AGENT_QD \
		--do_verify=1); then
		ok "fio randwrite zipf:1.1 QD$AGENT_QD with verify through a 16 MiB cache ($(echo "$out" |
			awk -F';' 'NF > 100 {print $49 " write IOPS"}'))"
	else
		echo "$out"; bad "fio verify through a small cache"
	fi
	touch "$WORK/stop"
	wait "$wpid" || true
	read -r max n <"$WORK/watch.out" || true
	[ -n "${max:-}" ] && [ "$max" -le $((target + SLACK)) ] &&
		ok "while writing: at most $((max >> 20)) MiB in $n objects in the cache pool (target 16 MiB + slack $((SLACK >> 20)) MiB)" ||
		bad "while writing the cache pool held ${max:-?} bytes (> target + slack)"
	local cb=0
	for _ in $(seq 1 60); do
		cb=$(H ls cache "$pre." | awk '{s += $2} END {print s + 0}')
		[ "$cb" -le "$target" ] && break
		sleep 0.5
	done
	[ "$cb" -le "$target" ] && ok "after the workload: $((cb >> 20)) MiB of the image in the cache pool (<= 16 MiB)" ||
		bad "after 30 s the cache pool still holds $cb bytes of the image (> 16 MiB)"
	R 30 rados df -f json >"$WORK/df.json" 2>/dev/null || true
	log "rados df cache pool bytes: $("$PY" -c 'import json,sys
print([p["size_bytes"] for p in json.load(open(sys.argv[1]))["pools"] if p["name"] == "cache"])' "$WORK/df.json" 2>/dev/null)"
	[ "$(perf agent evictions)" -gt 0 ] && [ "$(perf agent flushes)" -gt 0 ] &&
		ok "agent flushed $(perf agent flushes) and evicted $(perf agent evictions) objects" ||
		bad "agent did not flush and evict (flushes=$(perf agent flushes) evictions=$(perf agent evictions))"
	ctl agent flush --wait >/dev/null || bad "flush --wait failed"
	[ "$(sha_export_head "$img" 64)" = "$(sha256sum <"$WORK/rand64" | cut -d' ' -f1)" ] &&
		ok "agent: nothing lost, rbd export's first 64 MiB equal the file written (sha256)" ||
		bad "agent: rbd export differs from what was written"
	if out=$(fio_rbd "$img" --io_size=8M --verify_only 2>&1); then
		ok "agent: fio --verify_only through librbd: the base image holds fio's writes"
	else
		echo "$out" | tail -5; bad "agent: fio verify through librbd after flush"
	fi
	ctl agent evict --wait >/dev/null || true
	stop
}

# ================================================================ refuse
# refused NAME WHAT PATTERN...: tierd on $WORK/NAME.conf must exit non-zero
# (not by timeout) with every PATTERN in its stderr
refused() {
	local name=$1 what=$2 rc=0 p miss=""
	shift 2
	R 60 "$TIERD" --config "$WORK/$name.conf" 2>"$WORK/$name.log" >/dev/null || rc=$?
	for p in "$@"; do grep -qF -- "$p" "$WORK/$name.log" || miss="$miss '$p'"; done
	if [ "$rc" != 0 ] && [ "$rc" != 137 ] && [ -z "$miss" ]; then
		ok "$what: tierd exits $rc: $(grep -F -- "$1" "$WORK/$name.log" | head -1 | cut -c1-200)"
	else
		bad "$what: rc=$rc, missing$miss in: $(cat "$WORK/$name.log")"
	fi
}

# owner NAME IMAGE: what tierd NAME logged as its lock cookie and client is
# what `rbd lock ls` and `rbd status` show for IMAGE (issue 13 item 7)
owner() {
	local name=$1 image=$2 line cid cookie handle
	line=$(grep -F "image disk: rbd base/$image header rbd_header." "$WORK/$name.log" | tail -1)
	cid=$(echo "$line" | sed -n 's/.* watched by \(client\.[0-9]*\)$/\1/p')
	cookie=$(echo "$line" | sed -n "s/.*(rbd_lock, cookie '\(.*\)') and watched by .*/\1/p")
	handle=$(echo "$cookie" | sed -n 's/^auto \([0-9]*\) tierd:.*/\1/p')
	R 30 rbd lock ls "base/$image" >"$WORK/$name.lockls" 2>&1 || true
	R 30 rbd status "base/$image" >"$WORK/$name.status" 2>&1 || true
	if [ -n "$cid" ] && [ -n "$handle" ] && [ "${cookie##*:}" = "$TPID" ] &&
	   grep -qE "^$cid +$cookie " "$WORK/$name.lockls"; then
		ok "rbd lock ls names tierd (pid $TPID): $(grep -E "^$cid " "$WORK/$name.lockls")"
	else
		bad "rbd lock ls does not name tierd's $cid '$cookie': $line / $(cat "$WORK/$name.lockls")"
	fi
	if grep -qE "watcher=[^ ]+ $cid cookie=$handle\$" "$WORK/$name.status"; then
		ok "rbd status lists tierd as the watcher: $(grep watcher= "$WORK/$name.status" | tr -d '\t')"
	else
		bad "rbd status does not list $cid cookie=$handle: $(cat "$WORK/$name.status")"
	fi
}

section_refuse() {
	log "== refuse: object-map image, second tierd, wrong keyring"
	new_image "$T-om" 8M layering,exclusive-lock,object-map,fast-diff
	write_conf om "$T-om"
	refused om "object-map image refused" "rbd feature disable base/$T-om" "object-map"

	if [ -n "${MIX_PID:-}" ] && kill -0 "$MIX_PID" 2>/dev/null; then
		TPID=$MIX_PID
		first=mix img="$T-mix"
	else
		new_image "$T-two" 8M
		write_conf first "$T-two"
		start first
		first=first img="$T-two"
	fi
	owner "$first" "$img"
	# a second tierd with its own sockets serves the image in standby (issue
	# 30): it names the holder, and never takes the lock on its own
	write_conf second "$img"
	SPID_KEEP=$TPID
	start second
	SPID=$TPID
	TPID=$SPID_KEEP
	if ctl second images | grep -q '"owner": "standby"' &&
	   ctl second images | grep -q "\"lock_holder\": \"client\.[0-9]* at .*:$TPID'" &&
	   grep -q "is locked by client\..* serving it in standby" "$WORK/second.log"; then
		ok "a second tierd on a served image waits in standby, naming the holder"
	else
		bad "second tierd not in standby: $(ctl second images 2>&1; tail -5 "$WORK/second.log")"
	fi
	kill -TERM "$SPID"; R 60 tail --pid="$SPID" -f /dev/null || true
	owner "$first" "$img"
	# the same config as the first (same socket paths): refused on the live
	# socket, which stays the first one's
	cp "$WORK/$first.conf" "$WORK/same.conf"
	refused same "second tierd with the first one's config" "refusing to take it over"
	if [ -S "$WORK/$first.sock" ] && R 10 nbdinfo --size "$(uri "$first")" >/dev/null 2>&1 &&
	   ctl "$first" perf dump >/dev/null 2>&1; then
		ok "the first tierd still serves NBD and admin"
	else
		bad "second tierd with the same config: $(cat "$WORK/same.log")"
	fi
	stop
	MIX_PID=
	R 30 rbd lock ls "base/$img" >"$WORK/after.lockls" 2>&1 || true
	R 30 rbd status "base/$img" >"$WORK/after.status" 2>&1 || true
	if ! grep -q "exclusive lock" "$WORK/after.lockls" && ! grep -q "watcher=" "$WORK/after.status"; then
		ok "after SIGTERM neither rbd lock ls nor rbd status shows tierd"
	else
		bad "lock or watch left after stop: $(cat "$WORK/after.lockls" "$WORK/after.status")"
	fi

	R 30 ceph-authtool --create-keyring "$WORK/bad.keyring" --gen-key -n client.admin >/dev/null
	write_conf badkey "$T-om"
	sed -i "s|^op_timeout = .*|op_timeout = 10s\nkeyring = $WORK/bad.keyring|" "$WORK/badkey.conf"
	refused badkey "wrong keyring refused" "cannot connect to Ceph monitors [v2:127.0.0.1:" "client.admin"
}

# ================================================================ outage
# The base pool going away while tierd serves: a write that needs base waits
# about op_timeout, then fails with EIO (not a hang, not a crash); when the
# OSD comes back the same daemon serves again and the data is right.
section_outage() {
	log "== outage: base OSD frozen, then back"
	local pidfile osd t0 t1 out
	pidfile="$(dirname "$CEPH_CONF")/run/osd.0.pid"
	[ -f "$pidfile" ] || { bad "outage: no $pidfile (not a ceph-dev-cluster?)"; return; }
	osd=$(cat "$pidfile")
	new_image "$T-out" 64M
	write_conf out "$T-out" "min_write_recency_for_promote = 9" "hit_set_count = 8"
	sed -i "s|^op_timeout = .*|op_timeout = 3s|" "$WORK/out.conf"
	start out
	R 60 qemu-io -f raw -c 'write -P 0x31 0 64k' "$(uri out)" >/dev/null || bad "outage: first write"

	FROZEN=$osd
	kill -STOP "$osd"
	t0=$(date +%s)
	out=$(R 90 qemu-io -f raw -c 'write -P 0x32 8M 64k' "$(uri out)" 2>&1 || true)
	t1=$(date +%s)
	case $out in
	*"Input/output error"*) ok "outage: write to a frozen base pool fails with EIO after $((t1 - t0)) s" ;;
	*) bad "outage: write during the outage did not fail with EIO: $out" ;;
	esac
	[ $((t1 - t0)) -le 60 ] && ok "outage: failed within the op timeout bound" ||
		bad "outage: took $((t1 - t0)) s with op_timeout 3s"
	kill -0 "$TPID" 2>/dev/null && ok "outage: tierd still running" || bad "outage: tierd died"
	kill -CONT "$osd"
	FROZEN=

	local i done=0
	for i in $(seq 1 30); do
		if R 60 qemu-io -f raw -c 'write -P 0x33 8M 64k' "$(uri out)" 2>&1 | grep -q "wrote"; then
			done=1
			break
		fi
		sleep 1
	done
	[ "$done" = 1 ] && ok "outage: writes succeed again after the OSD is back (try $i)" ||
		bad "outage: no recovery after 30 s"
	out=$(R 60 qemu-io -f raw -c 'read -P 0x31 0 64k' -c 'read -P 0x33 8M 64k' "$(uri out)" 2>&1)
	if ! echo "$out" | grep -qi "fail\|error" &&
	   [ "$(echo "$out" | grep -c '^read 65536/65536 bytes')" = 2 ]; then
		ok "outage: data reads back after recovery"
	else
		bad "outage: data after recovery: $out"
	fi
	stop
}

t0=$(date +%s)
for s in $SECTIONS; do
	"section_$s"
done
log "done in $(( $(date +%s) - t0 )) s"
if [ "$fails" -gt 0 ]; then
	echo "$fails check(s) failed"
	exit 1
fi
echo "all checks passed"
