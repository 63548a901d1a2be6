#!/bin/bash
# SPDX-License-Identifier: MIT
# The systemd service contract without systemd as PID 1 (notify.py): READY=1
# only once the pools and listeners are up, STATUS=, WATCHDOG=1 at half of
# WATCHDOG_USEC, RELOADING=1 (MONOTONIC_USEC=) then READY=1 around SIGHUP,
# STOPPING=1 on SIGTERM; then `systemd-analyze verify` of deploy/tierd.service.
set -euo pipefail
: "${TIERD:?set TIERD to the tierd binary}"
HERE=$(cd "$(dirname "$0")" && pwd)
command -v nbdinfo >/dev/null || { echo "SKIP: nbdinfo not installed (deploy/install-deps.sh)"; exit 77; }
if ! ldd "$TIERD" | grep libsystemd >/dev/null; then
	echo "SKIP: tierd built without libsystemd (-Dsystemd=disabled): it sends no notifications"
	exit 77
fi
WORK=$(mktemp -d /tmp/tierd-notify.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
/usr/bin/python3 "$HERE/notify.py" "$TIERD" "$WORK"

# The unit as shipped, with ExecStart= pointing at this build's binary (verify
# insists that the command exists).
if command -v systemd-analyze >/dev/null; then
	sed "s#/usr/local/sbin/tierd#$TIERD#" "$HERE/../../deploy/tierd.service" > "$WORK/tierd.service"
	if ! out=$(systemd-analyze verify "$WORK/tierd.service" 2>&1) || [ -n "$out" ]; then
		echo "FAIL: systemd-analyze verify deploy/tierd.service: $out" >&2
		exit 1
	fi
	echo "ok: systemd-analyze verify deploy/tierd.service: clean"
else
	echo "FAIL: systemd-analyze missing (package systemd)" >&2
	exit 1
fi
