#!/bin/bash
# SPDX-License-Identifier: MIT
# Real power cuts of the local backend: both pools on ext4 on a loop device;
# a libnbd client (powercut.py) runs writes, FUA writes, reads (promotions),
# TRIM, WRITE_ZEROES and FLUSHes against tierd with a small cache (agent
# flushing and evicting all the time); at a random instant tierd is SIGKILLed
# and the filesystem shut down without flushing (no write reaches the device
# after it: the page cache is lost, as in a power cut); the loop device's
# backing file is copied, e2fsck'd, mounted, tierd restarted on it and every
# block checked against what the client may legally read back (durable by a
# completed FLUSH or FUA, or newer).  Also kill -9 rounds (every
# acknowledged write must read back).  Both promote_granularity modes.
#
# Env: TIERD, TIERCTL (set by meson); TIER_POWERCUT_CUTS (power cuts per
# mode, default 10; e.g. 300 for a long run), TIER_POWERCUT_KILL9 (kill -9
# rounds per mode, default 2), TIER_POWERCUT_MODES (default "object extent"),
# TIER_POWERCUT_SEED, TIER_POWERCUT_STOP_ON_FAIL=1, TIER_POWERCUT_KEEP=1
# (keep the work dir: tierd logs, fsck logs, cut images).
# Needs root and loop devices; exits 77 (skip) without them.
set -uo pipefail

: "${TIERD:?set TIERD to the tierd binary}"
: "${TIERCTL:?set TIERCTL to the tierctl binary}"
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "powercut needs root (loop devices, mount, EXT4_IOC_SHUTDOWN)"
for p in losetup mkfs.ext4 e2fsck mount umount findmnt cp; do
	command -v "$p" >/dev/null || skip "$p not installed (util-linux / e2fsprogs)"
done
"$PY" -c 'import nbd' 2>/dev/null || skip "python3-libnbd not installed (deploy/install-deps.sh)"

WORK=$(mktemp -d /tmp/tierd-powercut.XXXXXX)
PYPID=

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$PYPID" ] && kill -0 "$PYPID" 2>/dev/null; then
		kill -TERM "$PYPID" 2>/dev/null
		sleep 1
		kill -KILL "$PYPID" 2>/dev/null
	fi
	local pf pid
	for pf in "$WORK"/*/tierd.pid; do
		[ -f "$pf" ] || continue
		pid=$(cat "$pf")
		# only our tierd: its command line names our config
		if [ -n "$pid" ] && [ -e "/proc/$pid" ] && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "$WORK"; then
			kill -KILL "$pid" 2>/dev/null
			sleep 0.2
		fi
	done
	local m
	for m in $(findmnt -rn -o TARGET | grep "^$WORK/" | sort -r); do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
	done
	local img dev
	for img in $(find "$WORK" -name '*.img'); do
		for dev in $(losetup -j "$img" -O NAME -n 2>/dev/null); do
			losetup -d "$dev" 2>/dev/null
		done
	done
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
		for l in "$WORK"/tierd-*.log; do
			[ -f "$l" ] || continue
			echo "---- $(basename "$l") (tail) ----" >&2
			tail -n 30 "$l" >&2
		done
	fi
	if [ "${TIER_POWERCUT_KEEP:-0}" = 1 ]; then
		echo "powercut: work dir kept: $WORK"
	else
		rm -rf "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# loop devices must really work here (containers often lack them)
truncate -s 8M "$WORK/probe.img"
dev=$(losetup --find --show "$WORK/probe.img" 2>/dev/null) ||
	{ rm -f "$WORK/probe.img"; skip "no loop device support (losetup --find failed)"; }
losetup -d "$dev"
rm -f "$WORK/probe.img"

CUTS=${TIER_POWERCUT_CUTS:-10}
KILL9=${TIER_POWERCUT_KILL9:-2}
MODES=${TIER_POWERCUT_MODES:-object extent}
seed_args=()
[ -n "${TIER_POWERCUT_SEED:-}" ] && seed_args=(--seed "$TIER_POWERCUT_SEED")
keep_args=()
[ "${TIER_POWERCUT_KEEP:-0}" = 1 ] && keep_args=(--keep-images)

status=0
summary=()
for mode in $MODES; do
	mkdir -p "$WORK/$mode"
	# the client's memory is bounded (soft limit: tierd, a child, lifts it
	# again, since an ASan build reserves terabytes of address space)
	( ulimit -S -v 4000000; exec "$PY" "$HERE/powercut.py" --mode "$mode" --work "$WORK/$mode" \
		--tierd "$TIERD" --tierctl "$TIERCTL" --cuts "$CUTS" --kill9 "$KILL9" \
		"${seed_args[@]}" "${keep_args[@]}" ) > >(tee "$WORK/$mode.out") 2>&1 &
	PYPID=$!
	wait "$PYPID"
	rc=$?
	PYPID=
	sleep 0.1   # let tee finish
	summary+=("$(grep '^powercut: mode=' "$WORK/$mode.out" | tail -n 1)")
	if [ "$rc" -ne 0 ]; then
		status=1
		# bring the logs to the top level for the tail on exit
		cp "$WORK/$mode"/tierd-*.log "$WORK/" 2>/dev/null
	fi
done

echo "==== powercut summary"
printf '%s\n' "${summary[@]}"
[ "$status" -eq 0 ] && echo "PASS" || echo "FAIL: see POWERCUT FAILURE lines above"
exit "$status"
