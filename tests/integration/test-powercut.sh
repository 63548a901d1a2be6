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
# acknowledged write must read back).  Both promote_granularity modes.  Then
# kill -9 rounds with the pools on tmpfs (where the local store runs writes
# with a pre_meta, FUA or F_ORDERED inline on the loop: no cut to make).
#
# Env: TIERD, TIERCTL (set by meson); TIER_POWERCUT_CUTS (power cuts per
# mode, default 10; e.g. 300 for a long run), TIER_POWERCUT_KILL9 (kill -9
# rounds per mode, default 2), TIER_POWERCUT_MODES (default "object extent"),
# TIER_POWERCUT_SEED, TIER_POWERCUT_STOP_ON_FAIL=1, TIER_POWERCUT_KEEP=1
# (keep the work dir: tierd logs, fsck logs, cut images),
# TIER_POWERCUT_SERIAL=1 (one mode after the other), TIER_POWERCUT_KILL9_FLUSH
# (strict, the default: a FLUSH sent to the tierd restarted after kill -9
# makes durable what it reads back, including what the killed one left in the
# page cache; lenient: it does not, the durable floor stays where it was),
# TIER_POWERCUT_QD (client requests in flight, default 16; at 64 a full
# cache's agent may turn over faster: the summary's turnovers=),
# TIER_POWERCUT_AGENT_OPS (agent_max_ops, default 8; 16 or 32 give the
# agent as many jobs as a turnover does at QD 64 or deeper),
# TIER_POWERCUT_TMPFS_KILL9 (kill -9 rounds per mode on tmpfs, default 2).
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
PYPIDS=()

# cleanup STATUS: on every exit path (the EXIT trap, or INT/TERM directly:
# the signal handler does the work itself rather than through `exit` and the
# EXIT trap, which bash does not always run when the signal interrupts a wait)
cleanup() {
	local rc=$1
	trap - EXIT
	trap '' INT TERM     # a second signal must not cut the cleanup short
	local p pf pid
	# the clients (each records its pid), then their jobs, then tierd
	for pf in "$WORK"/*/client.pid; do
		[ -f "$pf" ] || continue
		pid=$(cat "$pf")
		if [ -n "$pid" ] && [ -e "/proc/$pid" ] && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "$WORK"; then
			kill -KILL "$pid" 2>/dev/null
		fi
	done
	for p in "${PYPIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null
	done
	sleep 0.2
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
trap 'cleanup $?' EXIT
trap 'cleanup 130' INT
trap 'cleanup 143' TERM

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

# Both modes run at once (each its own loop device, filesystem, tierd and
# client; every line they print names its mode): the rounds wait on fsync
# and device copies far more than on the CPU.  TIER_POWERCUT_SERIAL=1 runs
# them one after the other.
status=0
TK9=${TIER_POWERCUT_TMPFS_KILL9:-2}
RUNS=()
for mode in $MODES; do
	RUNS+=("$mode")
	[ "$TK9" -gt 0 ] && RUNS+=("$mode-tmpfs")
done
for run in "${RUNS[@]}"; do
	mode=${run%-tmpfs}
	fsargs=(--cuts "$CUTS" --kill9 "$KILL9")
	[ "$run" = "$mode" ] || fsargs=(--fs tmpfs --cuts 0 --kill9 "$TK9")
	mkdir -p "$WORK/$run"
	# the client's memory is bounded (soft limit: tierd and tierctl, its
	# children, get the hard one back: an ASan build reserves terabytes)
	( ulimit -S -v 4000000; exec "$PY" "$HERE/powercut.py" --mode "$mode" --work "$WORK/$run" \
		--tierd "$TIERD" --tierctl "$TIERCTL" "${fsargs[@]}" \
		--kill9-flush "${TIER_POWERCUT_KILL9_FLUSH:-strict}" \
		"${seed_args[@]}" "${keep_args[@]}" ) > >(tee "$WORK/$run.out") 2>&1 &
	PYPIDS+=($!)
	if [ "${TIER_POWERCUT_SERIAL:-0}" = 1 ]; then
		wait "${PYPIDS[-1]}" || status=1
	fi
done
for p in "${PYPIDS[@]}"; do
	wait "$p" || status=1
done
PYPIDS=()
sleep 0.2   # let tee finish
summary=()
for run in "${RUNS[@]}"; do
	summary+=("$run: $(grep '^powercut: mode=.* cuts=' "$WORK/$run.out" | tail -n 1)")
	[ -n "${summary[-1]#*: }" ] || summary[-1]="powercut: $run: no summary (crashed?)"
	# bring the logs to the top level for the tail on exit
	[ "$status" -eq 0 ] || cp "$WORK/$run"/tierd-*.log "$WORK/" 2>/dev/null
done

echo "==== powercut summary"
printf '%s\n' "${summary[@]}"
[ "$status" -eq 0 ] && echo "PASS" || echo "FAIL: see POWERCUT FAILURE lines above"
exit "$status"
