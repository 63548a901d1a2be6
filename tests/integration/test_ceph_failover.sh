#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/integration/test_ceph_failover.sh - images that outlive their tierd
# (suite 'ceph'; docs/OPERATIONS.md "Several daemons and failover").  Three tierds (a, b, c) name
# one RBD image; each check can fail:
#   handoff   FO_HANDOFFS rounds (default 20) of 4 KiB random writes at QD 32,
#             clients alternately on a and b (each round's first request
#             asks the other tierd for the image); every acknowledged block
#             reads back from both, 0 wrong; the handoffs are counted
#   kill9     the owner killed with -9: the next request on another tierd
#             takes over (the dead holder blocklisted first), data intact
#   sigstop   the owner SIGSTOPped with a write waiting in its socket: the
#             other takes over once the stopped one's watch times out, and
#             the blocklist fences it: after SIGCONT the late write is
#             refused (the block keeps the new owner's data), the old owner
#             reports the image fenced, `ceph osd blocklist ls` lists it,
#             `rbd lock ls` shows the new owner
#   race      two standbys asked at once for a dead owner's image: one owns
#             it, the other stays standby, the lock shows one holder
#   blocklist alone  sigstop with the stopped owner's own checks off
#             (TIERD_TEST_NO_SELF_FENCE=1): the blocklist refuses the late write
#   control   negative control: neither (TIERD_TEST_NO_BLOCKLIST=1 too): the
#             late write lands
#   timeout   a write of the owner times out (op_timeout 2 s, the cache OSD
#             stopped): asked for the image, the owner answers "fence-me"
#             instead of unlocking, and the asker blocklists it before it
#             takes the lock (without the rule: a cooperative unlock, no
#             blocklist entry: the check fails)
#   qemu      qemu-io with reconnect-delay rides over a handoff away from
#             its tierd and back; without it, it fails (the control)
#   shared    a tierd of another image starts beside them on the same cache
#             pool (the owned image's dirty copies are not its stranded
#             objects); hitset archives carry each tierd's tag
# The cluster's osd_client_watch_timeout is set to 5 s while it runs (and
# removed after; FO_WATCH_TIMEOUT=30 keeps the default).  Env: CEPH_CONF (required; exit 77 when unset), TIERD, TIERCTL.
set -uo pipefail

if [ -z "${CEPH_CONF:-}" ]; then
	echo "SKIP: CEPH_CONF is not set"
	exit 77
fi
: "${TIERD:?set TIERD}" "${TIERCTL:?set TIERCTL}"
PY=/usr/bin/python3
WORK=$(mktemp -d /tmp/tierd-fo.XXXXXX)
IMG=fo$$
ROUNDS=${FO_HANDOFFS:-20}
fails=0
declare -A PID

log() { echo "[$(date +%T)] $*"; }
ok() { echo "ok - $*"; }
bad() { echo "not ok - $*"; fails=$((fails + 1)); }
R() { local t=$1; shift; timeout -s KILL "$t" "$@"; }

cleanup() {
	for n in "${!PID[@]}"; do kill -CONT "${PID[$n]}" 2>/dev/null; kill -9 "${PID[$n]}" 2>/dev/null; done
	R 30 ceph config rm osd osd_client_watch_timeout >/dev/null 2>&1
	# the killed tierds left dirty copies: remove them with the image (the
	# next tierd on this cluster would find them stranded)
	if [ -n "${PFX:-}" ]; then
		R 60 rados -p cache ls 2>/dev/null | grep "^$PFX\." | while read -r o; do
			R 30 rados -p cache rm "$o"
		done
	fi
	R 60 rbd rm --no-progress "base/$IMG" >/dev/null 2>&1
	R 60 rbd rm --no-progress "base/$IMG-d" >/dev/null 2>&1
	if [ "$fails" -gt 0 ]; then
		for f in "$WORK"/*.log; do echo "---- $f"; tail -30 "$f"; done
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT


# FO_WATCH_TIMEOUT=30: the cluster's default (the takeover figure with it)
WT=${FO_WATCH_TIMEOUT:-5}
cp "$CEPH_CONF" "$WORK/ceph.conf"
if [ "$WT" != 30 ]; then
	R 30 ceph config set osd osd_client_watch_timeout "$WT"
	# a watch that times out after 5 s needs pings more often than librados'
	# default 5 s tick: the tierds here read this copy of the cluster's config
	printf '[client]\nobjecter tick interval = 1\n' >>"$WORK/ceph.conf"
fi
R 60 rbd create --size 64M --image-feature layering "base/$IMG"
PFX=$(R 60 rbd info "base/$IMG" | sed -n 's/.*block_name_prefix: //p')

conf() {
	cat >"$WORK/$1.conf" <<CFG
[global]
backend = rados
listen = unix:$WORK/$1.sock
admin_socket = $WORK/$1.asok
log_level = info
shutdown_timeout = 20s
threads = $([ "$1" = b ] && echo 2 || echo 1)
[rados]
conf = $WORK/ceph.conf
client_name = client.admin
base_pool = base
cache_pool = cache
op_timeout = ${OPT:-20s}
[tier]
hit_set_period = 1s
[image.disk]
rbd_image = $IMG
CFG
}
# start NAME [ENV=VALUE...]: tierd on $WORK/NAME.conf, up once its admin socket answers
start() {
	local n=$1
	shift
	conf "$n"
	rm -f "$WORK/$n.sock"
	env "$@" "$TIERD" --config "$WORK/$n.conf" 2>>"$WORK/$n.log" &
	PID[$n]=$!
	for _ in $(seq 1 300); do
		R 5 "$TIERCTL" --socket "$WORK/$n.asok" images >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	bad "tierd $n did not start"
}
stop9() { [ -n "${PID[$1]:-}" ] || return 0; kill -CONT "${PID[$1]}" 2>/dev/null; kill -9 "${PID[$1]}" 2>/dev/null; wait "${PID[$1]}" 2>/dev/null; unset "PID[$1]"; }
owner_of() {   # NAME: owned / standby / fenced ... of image disk
	R 10 "$TIERCTL" --socket "$WORK/$1.asok" images 2>/dev/null |
		$PY -c 'import json,sys; print(json.load(sys.stdin)["images"][0].get("owner","?"))'
}
count_of() {   # NAME FIELD
	R 10 "$TIERCTL" --socket "$WORK/$1.asok" images 2>/dev/null |
		$PY -c 'import json,sys; print(json.load(sys.stdin)["images"][0].get(sys.argv[1],0))' "$2"
}
in_blocklist() { [ -n "$1" ] && R 30 ceph osd blocklist ls 2>/dev/null | grep -qF "$1 "; }
lock_addr() { R 30 rbd lock ls "base/$IMG" | awk '/^client\./ {print $NF}' | sed 's/^v1://'; }

# ---- the client: python3-libnbd ----
cat >"$WORK/io.py" <<'EOF'
import json, nbd, os, random, sys, time
W = os.environ["WORK"]
def conn(n):
    h = nbd.NBD()
    h.connect_uri("nbd+unix:///disk?socket=%s/%s.sock" % (W, n))
    return h
def block(tag, i):
    return (("%s:%08d:" % (tag, i)).encode() * 512)[:4096]
cmd = sys.argv[1]
if cmd == "handoff":
    rounds, nblk = int(sys.argv[2]), 4096
    exp, rnd, firsts = {}, random.Random(7), []
    errors = [0]
    def done(err):
        if err.value:
            errors[0] += 1
        return 1               # retire the command
    for r in range(rounds):
        h = conn("a" if r % 2 == 0 else "b")
        t0 = time.time(); first = None; keep = []
        for i in range(256):
            while h.aio_in_flight() >= 32:
                h.poll(1000)
            b = rnd.randrange(nblk); data = block("r%d" % r, i)
            buf = nbd.Buffer.from_bytearray(bytearray(data))
            keep.append(buf)     # libnbd reads it when it sends: keep it alive
            h.aio_pwrite(buf, b * 4096, completion=done)
            exp[b] = data
            if first is None:
                while h.aio_in_flight() > 0:
                    h.poll(1000)
                first = time.time() - t0
        while h.aio_in_flight() > 0:
            h.poll(1000)
        h.flush(); h.shutdown(); firsts.append(first)
    wrong = 0
    for n in ("a", "b"):
        h = conn(n)
        for b, data in exp.items():
            if h.pread(4096, b * 4096) != data:
                wrong += 1
        h.shutdown()
    print(json.dumps({"blocks": len(exp), "wrong": wrong, "errors": errors[0], "first_max": max(firsts[1:] or [0]),
                      "first_mean": sum(firsts[1:]) / max(1, len(firsts) - 1)}))
elif cmd == "write":          # write NAME OFF TAG: one block, flushed
    h = conn(sys.argv[2]); h.pwrite(block(sys.argv[4], 0), int(sys.argv[3])); h.flush()
elif cmd == "read":           # read NAME OFF: the block's tag
    h = conn(sys.argv[2]); print(bytes(h.pread(4096, int(sys.argv[3])))[:16].decode().split(":")[0])
elif cmd == "late":           # late NAME OFF TAG: a write left in a stopped tierd's socket
    h = conn(sys.argv[2]); h.pwrite(block("old", 0), 8192); h.flush()
    open(W + "/late.ready", "w").close()
    while not os.path.exists(W + "/late.go"):
        time.sleep(0.05)
    buf = nbd.Buffer.from_bytearray(bytearray(block(sys.argv[4], 0)))
    c = h.aio_pwrite(buf, int(sys.argv[3]))
    open(W + "/late.sent", "w").close()
    try:
        t0 = time.time()
        while not h.aio_command_completed(c) and time.time() - t0 < 60:
            h.poll(1000)
        print("answered")
    except Exception as e:
        print("failed: %s" % e)
EOF
export WORK

# ================================================================ handoff
log "== handoff: $ROUNDS rounds, clients alternately on a and b, QD 32"
start a; start b
out=$(R 600 $PY "$WORK/io.py" handoff "$ROUNDS")
echo "$out"
wrong=$(echo "$out" | $PY -c 'import json,sys; j = json.load(sys.stdin); print(j["wrong"] + j["errors"])' 2>/dev/null)
ho=$(( $(count_of a handoffs || echo 0) + $(count_of b handoffs || echo 0) + 0 ))
if [ "$wrong" = 0 ]; then
	ok "handoff: every acknowledged block reads back from both tierds ($out)"
else
	bad "handoff: wrong blocks: $out"
fi
[ "$ho" -ge "$ROUNDS" ] && ok "handoff: $ho handoffs counted (tierctl images)" ||
	bad "handoff: only $ho handoffs counted, $ROUNDS rounds"
stop9 a; stop9 b

# ================================================================ kill9
log "== kill9: the owner killed, another takes over"
start a; start b
R 60 $PY "$WORK/io.py" write a 0 k9
A_ADDR=$(lock_addr)
stop9 a
t0=$(date +%s.%N)
got=$(R 60 $PY "$WORK/io.py" read b 0)
t1=$(date +%s.%N)
if [ "$got" = k9 ] && [ "$(owner_of b)" = owned ]; then
	ok "kill9: b took over in $(echo "$t1 - $t0" | bc) s and reads a's acknowledged write"
else
	bad "kill9: read '$got', b is $(owner_of b)"
fi
if in_blocklist "$A_ADDR"; then
	ok "kill9: the dead holder ($A_ADDR) was blocklisted before its lock was broken"
else
	bad "kill9: no blocklist entry / takeover line"
fi
stop9 b

# ================================================================ sigstop / control
# stopped NAME-OF-NEW-OWNER-ENV: a owns, a write waits in its socket while it is
# stopped, b takes over and writes "new"; prints what the block holds after SIGCONT
stopped() {   # A_ENV B_ENV [force]: environments of the owner and the taker;
	      # force: b fences a at once (tierctl acquire --force), no request to a
	rm -f "$WORK/late."*
	: >"$WORK/a.log"; : >"$WORK/b.log"
	# shellcheck disable=SC2086
	start a $1; start b $2
	# the late write goes to an object nobody else touches: whether it
	# reached a pool shows in the pools themselves, whatever path it took
	R 120 $PY "$WORK/io.py" late a $((8 * 4 << 20)) late >"$WORK/late.out" 2>&1 &
	local cpid=$!
	for _ in $(seq 1 100); do [ -e "$WORK/late.ready" ] && break; sleep 0.1; done
	A_ADDR=$(R 30 rbd lock ls "base/$IMG" | awk '/^client\./ {print $NF}' | sed 's/^v1://')
	kill -STOP "${PID[a]}"
	touch "$WORK/late.go"
	for _ in $(seq 1 100); do [ -e "$WORK/late.sent" ] && break; sleep 0.1; done
	local t0 t1
	t0=$(date +%s.%N)
	[ "${3:-}" = force ] && R 30 "$TIERCTL" --socket "$WORK/b.asok" acquire disk --force >/dev/null
	R 120 $PY "$WORK/io.py" write b 8192 new
	t1=$(date +%s.%N)
	TAKEOVER=$(echo "$t1 - $t0" | bc)
	kill -CONT "${PID[a]}"
	wait "$cpid"
	sleep 2
	LATE=none
	for pool in cache base; do
		R 30 rados -p "$pool" stat "$PFX.0000000000000008" >/dev/null 2>&1 && LATE="landed in $pool"
	done
	NEW=$(R 60 $PY "$WORK/io.py" read b 8192)
}

log "== sigstop: the owner stopped with a write in its socket"
stopped "" ""
if [ "$LATE" = none ] && [ "$NEW" = new ]; then
	ok "sigstop: b took over in $TAKEOVER s (watch timeout $WT s); a's late write reached no pool ($(cat "$WORK/late.out"))"
else
	bad "sigstop: late write: $LATE, b reads '$NEW' (late write: $(cat "$WORK/late.out"))"
fi
[ "$(owner_of a)" = fenced ] && ok "sigstop: a reports the image fenced" ||
	bad "sigstop: a reports '$(owner_of a)'"
R 30 rbd lock ls "base/$IMG" >"$WORK/lockls" 2>&1
if in_blocklist "$A_ADDR"; then
	ok "sigstop: ceph osd blocklist ls lists a at $A_ADDR ($(sed -n 's/.*holder was \(client\.[0-9]*\).*/\1/p' "$WORK/b.log" | tail -1))"
else
	bad "sigstop: a not in the blocklist: $(R 30 ceph osd blocklist ls 2>&1)"
fi
b_pid=${PID[b]}
grep -q "tierd:.*:$b_pid" "$WORK/lockls" && ok "sigstop: rbd lock ls shows b" ||
	bad "sigstop: rbd lock ls: $(cat "$WORK/lockls")"
stop9 a; stop9 b

# the blocklist alone (the stopped owner's own checks switched off) stops the
# late write, and without it the write lands: the pair shows the fence works.
# b takes the image with --force (fenced at once, nothing asked of a): a
# release request waiting for a when it resumes would close its connection
# before the late write is read, and hide the difference
log "== blocklist alone: the owner's self-fencing off (TIERD_TEST_NO_SELF_FENCE=1)"
stopped TIERD_TEST_NO_SELF_FENCE=1 "" force
if [ "$LATE" = none ] && [ "$NEW" = new ] && in_blocklist "$A_ADDR"; then
	ok "blocklist alone: the late write reached no pool ($(cat "$WORK/late.out"))"
else
	bad "blocklist alone: late write: $LATE, b reads '$NEW' (late write: $(cat "$WORK/late.out"))"
fi
stop9 a; stop9 b

log "== control: neither the blocklist nor self-fencing (TIERD_TEST_NO_BLOCKLIST=1)"
stopped TIERD_TEST_NO_SELF_FENCE=1 TIERD_TEST_NO_BLOCKLIST=1 force
if [ "$LATE" != none ]; then
	ok "control: without the blocklist the stopped owner's late write $LATE (the fence is what stops it)"
else
	bad "control: the late write reached no pool without the blocklist: the checks above prove nothing"
fi
stop9 a; stop9 b

# ================================================================ race
log "== race: two standbys asked at once for a dead owner's image"
start a; start b; start c
R 60 $PY "$WORK/io.py" write a 16384 race
A_ADDR=$(lock_addr)
stop9 a
R 10 "$TIERCTL" --socket "$WORK/b.asok" acquire disk >/dev/null &
p1=$!
R 10 "$TIERCTL" --socket "$WORK/c.asok" acquire disk >/dev/null &
p2=$!
wait "$p1" "$p2"
for _ in $(seq 1 100); do
	sb=$(owner_of b); sc=$(owner_of c)
	[ "$sb" != acquiring ] && [ "$sc" != acquiring ] && [ "$sb" != releasing ] &&
		[ "$sc" != releasing ] && break
	sleep 0.2
done
R 30 rbd lock ls "base/$IMG" >"$WORK/lockls" 2>&1
if { [ "$sb" = owned ] && [ "$sc" = standby ]; } || { [ "$sb" = standby ] && [ "$sc" = owned ]; }; then
	if grep -q "There is 1 exclusive lock" "$WORK/lockls"; then
		ok "race: one owns the image (b $sb, c $sc), one lock holder"
	else
		bad "race: rbd lock ls: $(cat "$WORK/lockls")"
	fi
else
	bad "race: b $sb, c $sc"
fi
got=$(R 60 $PY "$WORK/io.py" read b 16384)
[ "$got" = race ] && ok "race: the dead owner's acknowledged write reads back" || bad "race: read '$got'"
in_blocklist "$A_ADDR" && ok "race: the dead owner ($A_ADDR) is blocklisted" ||
	bad "race: the dead owner ($A_ADDR) is not in the blocklist"

# ================================================================ timeout
log "== timeout: a write of the owner timed out: fenced, never unlocked"
OSD1=$(cat "$(dirname "$CEPH_CONF")/run/osd.1.pid" 2>/dev/null || true)
if [ -z "$OSD1" ] || ! kill -0 "$OSD1" 2>/dev/null; then
	echo "skip - timeout: no running osd.1 (the cache pool's OSD) in $(dirname "$CEPH_CONF")/run"
else
	stop9 b; stop9 c
	OPT=2s start a; start b
	R 60 $PY "$WORK/io.py" write a 0 t1
	R 30 "$TIERCTL" --socket "$WORK/a.asok" promote disk 0 4M >/dev/null
	for _ in $(seq 1 50); do
		R 10 "$TIERCTL" --socket "$WORK/a.asok" status 2>/dev/null | grep -Eq '"cached_objects": ?[1-9]' && break
		sleep 0.1
	done
	A_ADDR=$(lock_addr)
	kill -STOP "$OSD1"
	R 30 $PY "$WORK/io.py" write a 0 t2 >/dev/null 2>&1 || true
	kill -CONT "$OSD1"
	unsafe=$(count_of a write_timed_out)
	got=$(R 90 $PY "$WORK/io.py" read b 0)
	if [ "$unsafe" = True ] && [ "$(owner_of b)" = owned ] && in_blocklist "$A_ADDR"; then
		ok "timeout: a ($A_ADDR) had a timed-out write; b blocklisted it before taking the image (reads '$got')"
	else
		bad "timeout: write_timed_out '$unsafe', b is $(owner_of b), a in blocklist: $(in_blocklist "$A_ADDR" && echo yes || echo no)"
	fi
	stop9 a; stop9 b
fi

# ================================================================ qemu
# the client recipe (docs/OPERATIONS.md): qemu's nbd driver with
# reconnect-delay rides over a handoff away from its tierd and back; without
# it the request after the handoff fails (the control)
log "== qemu: reconnect-delay across a handoff"
stop9 b; stop9 c
start a; start b
qemu_run() {   # OPTS: write, a pause in which b takes the image, read back
	local opts="driver=nbd,server.type=unix,server.path=$WORK/a.sock,export=disk$1"
	R 120 qemu-io -c 'write -P 0x5a 1M 64k' -c 'sleep 4000' -c 'read -P 0x5a 1M 64k' \
		--image-opts "$opts" >"$WORK/qemu.out" 2>&1 &
	local q=$!
	sleep 2
	R 60 $PY "$WORK/io.py" write b 0 q
	wait "$q"
}
if qemu_run ",reconnect-delay=10" && grep -q "read 65536/65536 bytes" "$WORK/qemu.out" &&
   ! grep -qi "error\|fail" "$WORK/qemu.out"; then
	ok "qemu: with reconnect-delay the read after the handoff succeeds and matches"
else
	bad "qemu with reconnect-delay: $(cat "$WORK/qemu.out")"
fi
if ! qemu_run "" || grep -qi "error\|fail" "$WORK/qemu.out"; then
	ok "qemu: without reconnect-delay the request after the handoff fails (the control)"
else
	bad "qemu without reconnect-delay did not fail: $(cat "$WORK/qemu.out")"
fi
stop9 a; stop9 b

# ================================================================ shared pool
# a tierd serving another image of the cluster starts beside them: the
# owned image's dirty copies in the shared cache pool are not its stranded
# objects (without the lock check it refused to start on them)
log "== shared: a tierd of another image beside the owner"
R 60 rbd create --size 16M --image-feature layering "base/$IMG-d"
IMG2="$IMG-d"
conf d
sed -i "s|^rbd_image = .*|rbd_image = $IMG-d|" "$WORK/d.conf"
rm -f "$WORK/d.sock"
"$TIERD" --config "$WORK/d.conf" 2>>"$WORK/d.log" &
PID[d]=$!
for _ in $(seq 1 300); do
	R 5 "$TIERCTL" --socket "$WORK/d.asok" images >/dev/null 2>&1 && break
	kill -0 "${PID[d]}" 2>/dev/null || break
	sleep 0.1
done
if [ "$(owner_of d)" = owned ] && grep -q "$PFX.\*: .* of an RBD image in use elsewhere (lock holder: client\.[0-9]* .*): left alone" "$WORK/d.log"; then
	ok "shared: the other image's tierd starts and leaves the owned image's cache objects alone"
else
	bad "shared: d is '$(owner_of d)': $(grep -i "stranded\|left alone\|refused" "$WORK/d.log" | head -3)"
fi
if R 60 rados -p cache ls 2>/dev/null | grep -q "^tier\.hitset\.$(hostname | tr -c 'A-Za-z0-9_\n-' '_')-[0-9a-f]\{8\}\.[0-9a-f]\{16\}$"; then
	ok "shared: hitset archives carry each tierd's tag"
else
	bad "shared: no tagged hitset archive: $(R 60 rados -p cache ls | grep tier.hitset | head -3)"
fi
stop9 d
stop9 b; stop9 c

if [ "$fails" -gt 0 ]; then
	echo "$fails check(s) failed"
	exit 1
fi
echo "all failover checks passed"
