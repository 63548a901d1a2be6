#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/integration/test_rbd.sh TIER_RBDINFO - RBD image resolution and the
# one-tierd-per-image lock against a real cluster (suite 'ceph'):
#   - a layering image resolves to the id, object prefix, size and order that
#     `rbd info` reports;
#   - object-map/fast-diff/exclusive-lock images are refused with the exact
#     `rbd feature disable` command, and running that command makes them servable;
#   - snapshots, clones and non-default striping are refused with what to run;
#   - the holder shows in `rbd lock ls` (lock rbd_lock, cookie "auto <handle>
#     tierd:host:boot:pid") and `rbd status` (the same client watches the
#     header, so `rbd rm` refuses it); an older tierd's lock "tierd" refuses too;
#   - a second open while the first holds the lock is refused naming the holder,
#     and the printed `rbd lock rm` command frees it; a holder killed with
#     -9 on this host leaves a stale lock that the next open breaks by itself;
#   - a wrong keyring and a missing image are refused with clear messages.
# Needs CEPH_CONF (deploy/ceph-dev-cluster env DIR); exits 77 (skip) only
# when CEPH_CONF is unset.
set -euo pipefail

INFO=${1:?usage: test_rbd.sh PATH/TO/tier-rbdinfo}
if [ -z "${CEPH_CONF:-}" ]; then
	echo "SKIP: CEPH_CONF is not set (deploy/ceph-dev-cluster start DIR; eval \"\$(deploy/ceph-dev-cluster env DIR)\")"
	exit 77
fi
POOL=base
T=rbdtest$$
TMP=$(mktemp -d)
HOLDER=""
fails=0

cleanup() {
	[ -n "$HOLDER" ] && kill -9 "$HOLDER" 2>/dev/null
	for img in "$T"-clone "$T"-plain "$T"-om "$T"-snap "$T"-stripe; do
		rbd snap unprotect "$POOL/$T-snap@s1" >/dev/null 2>&1 || true
		rbd snap purge "$POOL/$img" >/dev/null 2>&1 || true
		rbd rm --no-progress "$POOL/$img" >/dev/null 2>&1 || true
	done
	rm -rf "$TMP"
}
trap cleanup EXIT

R() { timeout -s KILL 60 "$@"; }
ok() { echo "ok - $*"; }
fail() { echo "not ok - $*"; fails=$((fails + 1)); }

# run the tool; stdout -> $TMP/out, stderr -> $TMP/err, exit code -> $rc
info() {
	rc=0
	R "$INFO" "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
}
field() { sed -n "s/^$1=//p" "$TMP/out"; }
expect_err() {   # $1 description, $2 fixed string the error must contain
	if [ "$rc" != 0 ] && grep -qF -- "$2" "$TMP/err"; then
		ok "$1"
	else
		fail "$1 (rc=$rc, stderr: $(cat "$TMP/err"))"
	fi
}

# 1. a plain layering image resolves like `rbd info` says
R rbd create --size 72M --image-feature layering "$POOL/$T-plain"
info "$POOL" "$T-plain"
want_prefix=$(R rbd info "$POOL/$T-plain" | sed -n 's/.*block_name_prefix: //p')
want_id=$(R rbd info "$POOL/$T-plain" | sed -n 's/^[[:space:]]*id: //p')
if [ "$rc" = 0 ] && [ "$(field size)" = $((72 << 20)) ] && [ "$(field order)" = 22 ] &&
   [ "$(field object_prefix)" = "$want_prefix" ] && [ "$(field id)" = "$want_id" ] &&
   [ "$(field features)" = 0x1 ]; then
	ok "layering image resolves: id $want_id, prefix $want_prefix, 72 MiB, order 22"
else
	fail "layering image resolution (rc=$rc): $(cat "$TMP/out" "$TMP/err")"
fi
# the lock is released on close: a second open right after succeeds
info "$POOL" "$T-plain"
[ "$rc" = 0 ] && ok "lock released by close" || fail "reopen after close: $(cat "$TMP/err")"

# 2. object-map image: refused with the exact command, which then fixes it
R rbd create --size 8M --image-feature layering,exclusive-lock,object-map,fast-diff "$POOL/$T-om"
info "$POOL" "$T-om"
expect_err "object-map image refused naming rbd feature disable" \
	"run: rbd feature disable $POOL/$T-om fast-diff object-map exclusive-lock"
cmd=$(sed -n 's/.*run: \(rbd feature disable [^(]*\) (.*/\1/p' "$TMP/err")
if [ -n "$cmd" ] && R $cmd && info "$POOL" "$T-om" && [ "$rc" = 0 ]; then
	ok "running the suggested '$cmd' makes the image servable"
else
	fail "suggested command '$cmd' did not make the image servable: $(cat "$TMP/err")"
fi

# 3. snapshots and clones
R rbd create --size 8M --image-feature layering "$POOL/$T-snap"
R rbd snap create --no-progress "$POOL/$T-snap@s1" >/dev/null
info "$POOL" "$T-snap"
expect_err "image with snapshots refused" "rbd snap purge $POOL/$T-snap"
R rbd snap protect "$POOL/$T-snap@s1"
R rbd clone "$POOL/$T-snap@s1" "$POOL/$T-clone"
info "$POOL" "$T-clone"
expect_err "clone refused" "rbd flatten $POOL/$T-clone"

# 4. non-default striping
R rbd create --size 8M --image-feature layering,striping --stripe-unit 64K \
	--stripe-count 4 "$POOL/$T-stripe"
info "$POOL" "$T-stripe"
expect_err "non-default striping refused" "non-default striping (stripe unit 65536, count 4)"

# 5. the holder is what `rbd lock ls` and `rbd status` show (issue 13 item 7):
# lock rbd_lock held by the same client.N that watches the header, cookie
# "auto <watch handle> tierd:<host>:<boot>:<pid>"; a second open while the
# first holds the lock names the holder
"$INFO" --hold 30 "$POOL" "$T-plain" >"$TMP/hold.out" 2>&1 &
HOLDER=$!
for _ in $(seq 1 100); do grep -q '^locked=yes' "$TMP/hold.out" && break; sleep 0.1; done
cid=$(sed -n 's/^client=//p' "$TMP/hold.out")
cookie=$(sed -n 's/^cookie=//p' "$TMP/hold.out")
handle=$(echo "$cookie" | sed -n 's/^auto \([0-9][0-9]*\) tierd:.*:\([0-9]*\)$/\1/p')
R rbd lock ls "$POOL/$T-plain" >"$TMP/lockls" 2>&1 || true
R rbd status "$POOL/$T-plain" >"$TMP/status" 2>&1 || true
if [ -n "$handle" ] && [ "${cookie##*:}" = "$HOLDER" ] &&
   grep -q "There is 1 exclusive lock on this image" "$TMP/lockls" &&
   grep -E "^$cid +$cookie " "$TMP/lockls" >/dev/null; then
	ok "rbd lock ls shows the holder: $(grep -E "^$cid " "$TMP/lockls")"
else
	fail "rbd lock ls does not show $cid with cookie '$cookie': $(cat "$TMP/lockls" "$TMP/hold.out")"
fi
if grep -qE "watcher=[^ ]+ $cid cookie=$handle\$" "$TMP/status"; then
	ok "rbd status lists the holder as the header's watcher: $(grep watcher= "$TMP/status" | tr -d '\t')"
else
	fail "rbd status does not list $cid cookie=$handle: $(cat "$TMP/status")"
fi
# rbd rm refuses a watched image (it was possible with the bare lock)
if R rbd rm --no-progress "$POOL/$T-plain" >"$TMP/rm" 2>&1; then
	fail "rbd rm removed an image tierd holds"
else
	grep -q "has watchers" "$TMP/rm" && ok "rbd rm refuses the served image (has watchers)" ||
		fail "rbd rm failed for another reason: $(cat "$TMP/rm")"
fi
info "$POOL" "$T-plain"
expect_err "second open refused while the first holds the lock" "is locked by $cid"
expect_err "refusal names the holder's cookie (host and pid)" ":$HOLDER'"
expect_err "refusal points at rbd lock ls" "rbd lock ls $POOL/$T-plain"
# the printed `rbd lock rm` frees a lock whose holder is still alive
brk=$(sed -n 's/.*then \(rbd lock rm .*\) (Device or resource busy)$/\1/p' "$TMP/err")
if [ -n "$brk" ] && eval "R $brk" && info "$POOL" "$T-plain" && [ "$rc" = 0 ]; then
	ok "the printed '$brk' frees the lock"
else
	fail "break command '$brk' did not free the lock: $(cat "$TMP/err")"
fi
kill -9 "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null || true; HOLDER=""
# closed: no lock, no watcher of ours
info "$POOL" "$T-plain"
R rbd lock ls "$POOL/$T-plain" >"$TMP/lockls" 2>&1 || true
if [ "$rc" = 0 ] && ! grep -q "exclusive lock" "$TMP/lockls" &&
   ! grep -q "$(sed -n 's/^client=//p' "$TMP/out") " "$TMP/lockls"; then
	ok "a closed image shows no lock in rbd lock ls"
else
	fail "lock left after close: $(cat "$TMP/lockls" "$TMP/err")"
fi

# 5b. a lock of an older tierd (lock "tierd", cookie tierd:host:boot:pid of
# another host) still refuses the open, naming it
R rados -p "$POOL" lock get "rbd_header.$want_id" tierd --lock-cookie "tierd:otherhost:0badc0de:42" \
	--lock-description "old tierd" >/dev/null
info "$POOL" "$T-plain"
expect_err "an older tierd's lock 'tierd' refuses the open" "an older tierd's lock 'tierd'"
R rados -p "$POOL" lock break "rbd_header.$want_id" tierd "$(R rados -p "$POOL" lock info \
	"rbd_header.$want_id" tierd | grep -o '"client\.[0-9]*"' | tr -d '"' | head -1)" \
	--lock-cookie "tierd:otherhost:0badc0de:42" || true
info "$POOL" "$T-plain"
[ "$rc" = 0 ] && ok "free again once the old lock is broken" || fail "reopen: $(cat "$TMP/err")"

# 6. a holder killed with -9 leaves a stale lock; the next open breaks it
"$INFO" --hold 30 "$POOL" "$T-plain" >"$TMP/hold.out" 2>&1 &
HOLDER=$!
for _ in $(seq 1 100); do grep -q '^locked=yes' "$TMP/hold.out" && break; sleep 0.1; done
kill -9 "$HOLDER"; wait "$HOLDER" 2>/dev/null || true; HOLDER=""
hdr="rbd_header.$want_id"
R rados -p "$POOL" lock info "$hdr" rbd_lock >"$TMP/lock.json" 2>&1 || true
if grep -q '"cookie"' "$TMP/lock.json"; then
	info "$POOL" "$T-plain"
	[ "$rc" = 0 ] && ok "stale lock of a killed holder on this host is broken" ||
		fail "stale lock not broken: $(cat "$TMP/err")"
else
	fail "killed holder left no lock to test with: $(cat "$TMP/lock.json" "$TMP/hold.out")"
fi

# 7. wrong keyring and missing image
R ceph-authtool --create-keyring "$TMP/bad.keyring" --gen-key -n client.admin >/dev/null
info --keyring "$TMP/bad.keyring" --timeout 10 "$POOL" "$T-plain"
expect_err "wrong keyring refused naming the cephx id" "as client.admin"
expect_err "wrong keyring refusal names the monitors" "cannot connect to Ceph monitors [v2:127.0.0.1:"
info "$POOL" "$T-nonexistent"
expect_err "missing image refused" "no RBD format-2 image $POOL/$T-nonexistent"
info "no-such-pool" "$T-plain"
expect_err "missing pool refused" "pool no-such-pool"

if [ "$fails" -gt 0 ]; then
	echo "$fails check(s) failed"
	exit 1
fi
echo "all checks passed"
