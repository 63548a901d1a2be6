#!/bin/bash
# SPDX-License-Identifier: MIT
# Stranded cache objects with the real tierd on the local backend: cache
# objects of an image removed from the config (or past the end of a shrunk
# image).  Dirty ones refuse the start with a message naming the image and
# the command; `tierd --stranded flush` writes them to base (re-adding the
# image reads them back), `--stranded drop --force` discards them, and clean
# ones are removed at start so a re-added image never adopts a stale copy
# (proven by changing the base object behind tierd's back).
. "$(dirname "$0")/lib.sh"

OS=$((4 * 1024 * 1024))
TIERCTL=${TIERCTL:-}
PY=/usr/bin/python3
"$PY" -c 'import nbd' 2>/dev/null || { echo "SKIP: python3-libnbd not installed"; exit 77; }
nbdpy() { "$PY" -c "import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
$2" "$(uri "$1")"; }

# conf "IMAGE SIZE" ...: [image.disk] always (start_tierd waits for it)
conf() {
	{
		cat <<CFG
[global]
backend = local
listen = unix:$SOCK
admin_socket = $ASOK
log_level = info

[local]
data_dir = $WORK/data
base_profile = none
cache_profile = none

[tier]
target_max_bytes = 256M
hit_set_period = 2s
promote_granularity = extent
write_miss = promote
min_write_recency_for_promote = 0
min_read_recency_for_promote = 0
promote_max_bytes_sec = 0
promote_max_objects_sec = 0

[image.disk]
size = 16M
CFG
		for spec in "$@"; do
			set -- $spec
			printf '\n[image.%s]\nsize = %s\n' "$1" "$2"
		done
	} > "$CONF"
}

# pwrite IMAGE OFFSET LENGTH BYTE: write LENGTH bytes of BYTE (hex, e.g. aa)
pwrite() {
	nbdpy "$1" "h.pwrite(bytes([0x$4]) * $3, $2)"
}
# pcheck IMAGE OFFSET LENGTH BYTE: every byte read is BYTE
pcheck() {
	nbdpy "$1" "
b = h.pread($3, $2)
if b != bytes([0x$4]) * $3:
    sys.exit('image $1 at $2: got %s..., want 0x$4' % b[:8].hex())
" || fail "read of $1 at $2 is not 0x$4"
}

kill9() {
	kill -KILL "$TIERD_PID"
	wait "$TIERD_PID" 2>/dev/null || true
	TIERD_PID=
	log "tierd killed with -9"
}

cache_objs() { ls "$WORK/data/cache" | grep -c "^rbd_data\.$1\." || true; }

# expect_refused WHAT: tierd must fail to start, naming WHAT and the command
expect_refused() {
	local out=$WORK/refused.log rc=0
	timeout 60 "$TIERD" --config "$CONF" > "$out" 2>&1 || rc=$?
	cat "$out" >> "$LOG"
	[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { cat "$out"; fail "tierd started (rc $rc) with dirty stranded objects"; }
	grep -q "start refused" "$out" || { cat "$out"; fail "no refusal message"; }
	grep -q "$1" "$out" || { cat "$out"; fail "refusal does not name '$1'"; }
	grep -q "dirty bytes" "$out" || { cat "$out"; fail "refusal gives no dirty bytes"; }
	grep -qF "tierd --config $(realpath "$CONF") --stranded flush" "$out" ||
		{ cat "$out"; fail "refusal does not print the exact command"; }
	log "start refused as expected: $(grep -m1 'stranded cache objects of' "$out")"
}

# ---------------------------------------------------------------- flush
log "flush: dirty data of image a, a removed from the config"
conf "a 64M"
start_tierd
pwrite a 0 4096 a1
pwrite a $((OS + 8192)) 8192 a2
pwrite a $((5 * OS)) 4096 a3
[ "$(cache_objs a)" -ge 3 ] || fail "writes to a did not land in the cache"
kill9

conf
expect_refused "image a (objects rbd_data.a.\*)"
grep -q "3 dirty object(s), 16384 dirty bytes" "$WORK/refused.log" ||
	{ cat "$WORK/refused.log"; fail "wrong dirty counts"; }

out=$("$TIERD" --config "$CONF" --stranded list) || fail "--stranded list failed"
echo "$out"
echo "$out" | grep -q "rbd_data.a.0000000000000001  dirty  8192 dirty bytes" || fail "list misses an object"
echo "$out" | grep -q "total: 3 stranded object(s), 3 dirty, 16384 dirty bytes" || fail "list total"

if "$TIERD" --config "$CONF" --stranded drop > "$WORK/drop.out" 2>&1; then
	fail "drop without --force succeeded"
fi
grep -q -- "--force" "$WORK/drop.out" || { cat "$WORK/drop.out"; fail "drop did not ask for --force"; }
[ "$(cache_objs a)" -eq 3 ] || fail "drop without --force removed something"

# a base extent the cache copy does not hold dirty: flush must not overwrite it
printf '\xb7%.0s' $(seq 1 4096) | dd of="$WORK/data/base/rbd_data.a.0000000000000000" \
	bs=4096 seek=16 conv=notrunc status=none

out=$("$TIERD" --config "$CONF" --stranded flush 2>>"$LOG") || fail "--stranded flush failed"
echo "$out"
echo "$out" | grep -q "flushed 3 dirty object(s), 16384 bytes" || fail "flush summary"
[ "$(cache_objs a)" -eq 0 ] || fail "flush left cache objects of a"
cmp -n 4096 <(printf '\xa1%.0s' $(seq 1 4096)) "$WORK/data/base/rbd_data.a.0000000000000000" ||
	fail "base object 0 of a lacks the flushed data"

start_tierd     # nothing stranded now
stop_tierd

log "re-add a: reads return what was written"
conf "a 64M"
start_tierd
pcheck a 0 4096 a1
pcheck a $((OS + 8192)) 8192 a2
pcheck a $((5 * OS)) 4096 a3
pcheck a $((16 * 4096)) 4096 b7
pcheck a 4096 4096 00
stop_tierd

# ---------------------------------------------------------------- drop
log "drop --force: dirty data of image b discarded"
conf "a 64M" "b 32M"
start_tierd
pwrite b 0 65536 c1
kill9
conf "a 64M"
expect_refused "image b (objects rbd_data.b.\*)"
out=$("$TIERD" --config "$CONF" --stranded drop --force 2>>"$LOG") || fail "drop --force failed"
echo "$out"
echo "$out" | grep -q "discarded 1 dirty object(s), 65536 dirty bytes" || fail "drop summary"
[ "$(cache_objs b)" -eq 0 ] || fail "drop left cache objects of b"
conf "a 64M" "b 32M"
start_tierd
pcheck b 0 65536 00
stop_tierd

# ---------------------------------------------------------------- shrink, dirty
log "shrink: dirty data past the new end of a refuses the start"
start_tierd
pwrite a $((9 * OS)) 4096 d1
kill9
conf "a 32M" "b 32M"
expect_refused "image a (objects rbd_data.a.\*), past its end"
"$TIERD" --config "$CONF" --stranded flush >/dev/null 2>>"$LOG" || fail "flush past the end"
conf "a 64M" "b 32M"
start_tierd
pcheck a $((9 * OS)) 4096 d1
stop_tierd

# ---------------------------------------------------------------- clean only
log "clean: stale clean copies are removed at start, never adopted"
conf "a 64M" "b 32M" "c 16M" "d 16M"
start_tierd
pwrite c $((3 * OS)) 4096 e1
pwrite d 0 4096 e2
pcheck c $((3 * OS)) 4096 e1
if [ -n "$TIERCTL" ]; then
	"$TIERCTL" --socket "$ASOK" flush --wait --timeout 60 >/dev/null || fail "tierctl flush"
else
	echo flush | timeout 10 socat - "UNIX-CONNECT:$ASOK" >/dev/null || fail "admin flush"
	sleep 3
fi
stop_tierd
[ "$(cache_objs c)" -ge 1 ] && [ "$(cache_objs d)" -ge 1 ] || fail "no clean copies cached"

conf "a 64M" "b 32M" "c 8M"      # c shrinks past object 3, d is removed
start_tierd
grep -q "stranded cache objects of image d (objects rbd_data.d.\*), not in the config: removing 1 clean" "$LOG" ||
	fail "removal of d's clean copy not logged"
grep -q "stranded cache objects of image c (objects rbd_data.c.\*), past its end" "$LOG" ||
	fail "removal of c's clean copy past its end not logged"
stop_tierd
[ "$(cache_objs d)" -eq 0 ] || fail "clean stranded copy of d kept"
[ -e "$WORK/data/cache/rbd_data.c.0000000000000003" ] && fail "clean copy past the end of c kept"

# change the base objects behind tierd's back: a stale copy would hide this
printf '\xf0%.0s' $(seq 1 4096) | dd of="$WORK/data/base/rbd_data.c.0000000000000003" \
	bs=4096 conv=notrunc status=none
printf '\xf1%.0s' $(seq 1 4096) | dd of="$WORK/data/base/rbd_data.d.0000000000000000" \
	bs=4096 conv=notrunc status=none
conf "a 64M" "b 32M" "c 16M" "d 16M"
start_tierd
pcheck c $((3 * OS)) 4096 f0
pcheck d 0 4096 f1
stop_tierd
log "PASS"
